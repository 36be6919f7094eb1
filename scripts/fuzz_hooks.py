"""Schemathesis hooks of scripts/fuzz-api: bodies of `text/csv` (POST /v1/jobs/{id}/verify,
which offers no other media type) are sent as their text."""

import schemathesis


@schemathesis.serializer("text/csv")
class CsvSerializer:
    """A generated string body as it is; anything else as its text."""

    def as_requests(self, context, value):
        return {"data": value if isinstance(value, (str, bytes)) else str(value)}

    def as_werkzeug(self, context, value):
        return {"data": value if isinstance(value, (str, bytes)) else str(value)}
