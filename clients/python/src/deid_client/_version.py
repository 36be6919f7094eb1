"""Version of the client and of the API it speaks.

The client's major version is the API's version (``/v1`` → ``1.x``); minor and patch versions
are the client's own. ``SERVICE_VERSION`` is the deid release (``Cargo.toml``) whose
``openapi.yaml`` the types were written against.
"""

__version__ = "1.0.0"
API_VERSION = "v1"
SERVICE_VERSION = "0.1.0"
