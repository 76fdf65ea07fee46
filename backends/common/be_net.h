/* be_net.h - network set-up shared by backends. */
#ifndef BE_NET_H
#define BE_NET_H

/* Brings up the loopback interface of the calling process's network
 * namespace (a new one starts with lo down).  Best effort. */
void be_lo_up(void);

#endif
