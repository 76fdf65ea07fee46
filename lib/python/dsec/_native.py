"""ctypes bindings of the part of libdsec the SDK uses.

The SDK speaks the protocol of dsec-protocol(7) over libdsec's
connections: libdsec dials (ipc, tcp, tls+tcp with the cluster's
certificates), times requests out and posts each reply to a completion
queue whose descriptor an event loop watches (dsec_call_async,
dsec_cq_*); the SDK packs requests and reads replies with msgpack.
"""
import ctypes
import ctypes.util
import os

ERR_MSG_MAX = 512


class Err(ctypes.Structure):
    """struct dsec_err: a stable code, the errno behind it, a message."""
    _fields_ = [("code", ctypes.c_int), ("errnum", ctypes.c_int),
                ("msg", ctypes.c_char * ERR_MSG_MAX)]


class Completion(ctypes.Structure):
    """struct dsec_completion: an ended asynchronous call."""
    _fields_ = [("tag", ctypes.c_void_p), ("rc", ctypes.c_int),
                ("err", ctypes.POINTER(Err)), ("reply", ctypes.c_void_p),
                ("reply_len", ctypes.c_size_t), ("call", ctypes.c_void_p)]


class ConnectOpts(ctypes.Structure):
    """struct dsec_connect_opts."""
    _fields_ = [("wait", ctypes.c_double), ("lazy", ctypes.c_bool)]


class Tls(ctypes.Structure):
    """struct dsec_tls: PEM files for a tls+tcp:// address."""
    _fields_ = [("ca", ctypes.c_char_p), ("cert", ctypes.c_char_p),
                ("server_name", ctypes.c_char_p)]


def _candidates():
    env = os.environ.get("DSEC_LIBDSEC")
    if env:
        yield env
    # In the source tree: lib/python/dsec/ -> lib/libdsec.so
    here = os.path.dirname(os.path.abspath(__file__))
    yield os.path.join(here, "..", "..", "libdsec.so")
    found = ctypes.util.find_library("dsec")
    if found:
        yield found
    yield "libdsec.so.1"


def _load():
    last = None
    for path in _candidates():
        if os.sep in path and not os.path.exists(path):
            continue
        try:
            return ctypes.CDLL(path)
        except OSError as e:
            last = e
    raise OSError("cannot load libdsec (set DSEC_LIBDSEC to its path): %s" % last)


lib = _load()
_P = ctypes.c_void_p
_E = ctypes.POINTER(Err)

lib.dsec_connect_tls.argtypes = [ctypes.POINTER(_P), ctypes.c_char_p,
                                 ctypes.POINTER(ConnectOpts), ctypes.POINTER(Tls), _E]
lib.dsec_connect_tls.restype = ctypes.c_int
lib.dsec_close.argtypes = [_P]
lib.dsec_close.restype = None
lib.dsec_set_timeout.argtypes = [_P, ctypes.c_double]
lib.dsec_set_timeout.restype = None
lib.dsec_cq_new.argtypes = [ctypes.POINTER(_P), _E]
lib.dsec_cq_new.restype = ctypes.c_int
lib.dsec_cq_fd.argtypes = [_P]
lib.dsec_cq_fd.restype = ctypes.c_int
lib.dsec_cq_next.argtypes = [_P, ctypes.POINTER(Completion)]
lib.dsec_cq_next.restype = ctypes.c_int
lib.dsec_completion_free.argtypes = [ctypes.POINTER(Completion)]
lib.dsec_completion_free.restype = None
lib.dsec_cq_free.argtypes = [_P]
lib.dsec_cq_free.restype = None
lib.dsec_call_async.argtypes = [_P, _P, ctypes.c_char_p, ctypes.c_size_t, ctypes.c_double,
                                _P, ctypes.POINTER(_P), _E]
lib.dsec_call_async.restype = ctypes.c_int
lib.dsec_call_cancel.argtypes = [_P]
lib.dsec_call_cancel.restype = None
lib.dsec_code_name.argtypes = [ctypes.c_int]
lib.dsec_code_name.restype = ctypes.c_char_p


def code_name(code):
    """The wire name of a libdsec error code ("unavailable", ...)."""
    return lib.dsec_code_name(code).decode()
