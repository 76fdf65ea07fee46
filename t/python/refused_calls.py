"""For the tests (t/helper-py puts this folder on the path): the source of
Python programs run inside a sandbox that make system calls its seccomp
filter refuses, through ctypes, and print the errnos they got."""


def rounds(calls):
    """A program that makes calls (tuples: the syscall number, then its
    arguments) argv[1] times over and prints the distinct errnos, sorted,
    then how many calls it made."""
    return _HEAD + f"""
out = []
for _ in range(int(sys.argv[1])):
    for c in {calls!r}:
        out.append(call(c))
print(" ".join(map(str, sorted(set(out)))), len(out))
"""


def each(calls):
    """A program that makes calls once each and prints each one's errno."""
    return _HEAD + f"""
print(" ".join(str(call(c)) for c in {calls!r}))
"""


_HEAD = r"""
import ctypes, sys
libc = ctypes.CDLL(None, use_errno=True)
libc.syscall.restype = ctypes.c_long
def call(c):
    ctypes.set_errno(0)
    r = libc.syscall(*[ctypes.c_long(a) for a in c])
    return ctypes.get_errno() if r < 0 else 0
"""
