"""Exceptions, one class per stable error code of dsec-protocol(7).

Programs decide on the class (or .code), never on the message.
Infrastructure failures (SandboxLost, NodeLost, Unavailable) are
InfrastructureError too: a trainer should not score a rollout that met
one, but start it again.
"""


class DsecError(Exception):
    """A request failed: .code is the stable name, .message the text.

    .cluster is the cluster's free capacity when a create or call found
    no node with room (NoCapacity from a node that places over the
    cluster): a dict of nodes, alive, offering, with_room, slots_free,
    slots_limit, slots_free_max, mem_free, mem_free_max, queue; else None.
    """
    code = "internal"
    cluster = None

    def __init__(self, message, code=None):
        super().__init__(message)
        self.message = message
        if code is not None:
            self.code = code

    def __str__(self):
        return "%s (%s)" % (self.message, self.code)


class InfrastructureError(DsecError):
    """The platform failed, not the agent's command."""


def _define(name, code, base=DsecError, doc=""):
    cls = type(name, (base,), {"code": code, "__doc__": doc or "Error code %r." % code})
    globals()[name] = cls
    return cls


_CODES = [
    ("BadRequest", "bad_request", DsecError, "Malformed request."),
    ("UnsupportedVersion", "unsupported_version", DsecError, "Protocol version not spoken."),
    ("UnknownOp", "unknown_op", DsecError, "Operation the daemon does not know."),
    ("TooLarge", "too_large", DsecError, "A frame or field over its cap."),
    ("NotFound", "not_found", DsecError, "No such sandbox, file or image."),
    ("Exists", "exists", DsecError, "Already there."),
    ("NoBackend", "no_backend", DsecError, "Backend not loaded on the node."),
    ("Unsupported", "unsupported", DsecError, "The backend cannot do this."),
    ("NoCapacity", "capacity", DsecError, "The node (or cluster) is full or draining: back off."),
    ("Timeout", "timeout", DsecError, "The operation itself timed out."),
    ("PermissionDenied", "permission", DsecError, "Not allowed (a path escapes, a certificate)."),
    ("Invalid", "invalid", DsecError, "Well-formed but unacceptable value."),
    ("BackendError", "backend_error", InfrastructureError, "The backend failed."),
    ("ShuttingDown", "shutting_down", InfrastructureError, "The daemon is stopping."),
    ("Unavailable", "unavailable", InfrastructureError, "The daemon cannot be reached."),
    ("Internal", "internal", DsecError, "A bug, or a reply that breaks the protocol."),
    ("Busy", "busy", DsecError, "The object is running something: retry after it."),
    ("SandboxLost", "sandbox_lost", InfrastructureError, "The sandbox died under its commands."),
    ("NodeLost", "node_lost", InfrastructureError, "The sandbox's node is dead or gone."),
    ("Diverged", "diverged", DsecError,
     "A step the trajectory log has (or runs) with another request: nothing ran."),
]
BY_CODE = {code: _define(name, code, base, doc) for name, code, base, doc in _CODES}


def error_for(code, message, error=None):
    """The exception for a code (an unknown one is Internal's kind);
    error is the reply's error map, for what it carries besides."""
    cls = BY_CODE.get(code)
    exc = DsecError(message, code) if cls is None else cls(message)
    if isinstance(error, dict) and isinstance(error.get("cluster"), dict):
        exc.cluster = error["cluster"]
    return exc
