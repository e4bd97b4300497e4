"""The errors emq raises (SPEC §10). Every message names the verb and what is wrong."""

import builtins


class EmqError(Exception):
    """Base of every emq error."""


class LayoutError(EmqError):
    """A key of the wrong type, or a wire-form key list that is not the queue's layout."""


class ArgumentError(EmqError, ValueError):
    """An argument with a bad value; nothing was read or written."""


class ContentionError(EmqError):
    """A call gave up after its EXEC kept being aborted; nothing was written."""


class ConnectionError(EmqError, builtins.ConnectionError):
    """The server could not be reached, or the connection broke."""


class TimeoutError(ConnectionError, builtins.TimeoutError):
    """The server did not answer within the read (or connect) timeout."""


class ScriptingError(EmqError):
    """The Lua backend cannot run: scripting is not allowed for this user."""


class DuplicateJobError(EmqError):
    """An add named a job id that exists; nothing was written."""


class ServerError(EmqError):
    """Any other error reply from the server."""


__all__ = [
    "ArgumentError",
    "ConnectionError",
    "ContentionError",
    "DuplicateJobError",
    "EmqError",
    "LayoutError",
    "ScriptingError",
    "ServerError",
    "TimeoutError",
]
