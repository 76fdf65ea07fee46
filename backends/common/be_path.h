/* be_path.h - finding a command's program along PATH, as execvp() does,
 * but with the PATH of the command's environment rather than ours (a
 * process sharing its memory with another must not change its own).
 * Used by the container init (to execute, and to tell which file a
 * command would execute) and by the warm shell's children.
 */
#ifndef BE_PATH_H
#define BE_PATH_H

/* PATH when the environment has none. */
#define BE_DEFAULT_PATH "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"

/* Calls try(path, arg) for each file cmd may name: cmd itself if it has a
 * '/', else each PATH entry of envp (its last PATH=, else BE_DEFAULT_PATH)
 * joined with cmd, an empty entry as "./cmd".  try returns 0 to go on, or
 * anything else to stop: be_path_each returns that, or 0 when every
 * candidate was tried (or was too long to try). */
int be_path_each(const char *cmd, char *const *envp, int (*try)(const char *path, void *arg),
		 void *arg);

/* execve(cmd, argv, envp) along PATH like execvp: returns only on failure,
 * with errno EACCES if some candidate was not executable, else that of
 * the first other failure, else ENOENT. */
void be_path_exec(char *const *argv, char *const *envp);

#endif
