"""A Server-Sent Events parser (the subset of the WHATWG rules the job event stream needs)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import AsyncIterable, AsyncIterator, Iterable, Iterator


@dataclass
class SseMessage:
    event: str
    data: str
    id: str | None


class SseParser:
    """Feed it lines (without line terminators); it returns a message at each blank line."""

    def __init__(self) -> None:
        self._event = ""
        self._data: list[str] = []
        self._id: str | None = None
        self.last_id: str | None = None

    def feed(self, line: str) -> SseMessage | None:
        if line == "":
            if not self._data and not self._event:
                return None
            msg = SseMessage(self._event or "message", "\n".join(self._data), self._id)
            self._event, self._data = "", []
            return msg
        if line.startswith(":"):
            return None
        name, sep, value = line.partition(":")
        if sep and value.startswith(" "):
            value = value[1:]
        if name == "event":
            self._event = value
        elif name == "data":
            self._data.append(value)
        elif name == "id" and "\0" not in value:
            self._id = value
            self.last_id = value
        return None


def parse_lines(lines: Iterable[str]) -> Iterator[SseMessage]:
    parser = SseParser()
    for line in lines:
        msg = parser.feed(line.rstrip("\r\n"))
        if msg is not None:
            yield msg


async def aparse_lines(lines: AsyncIterable[str]) -> AsyncIterator[SseMessage]:
    parser = SseParser()
    async for line in lines:
        msg = parser.feed(line.rstrip("\r\n"))
        if msg is not None:
            yield msg
