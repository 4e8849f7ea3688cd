"""The server's logging: one JSON event per line on stderr."""

from __future__ import annotations

import json
import logging
import sys
from typing import Any


class JsonFormatter(logging.Formatter):
    """One event per line; extra fields such as request_id are kept."""

    _skip = set(vars(logging.makeLogRecord({})))

    def format(self, record: logging.LogRecord) -> str:
        entry: dict[str, Any] = {
            "at": self.formatTime(record, "%Y-%m-%dT%H:%M:%S"),
            "level": record.levelname.lower(),
            "logger": record.name,
            "event": record.getMessage(),
        }
        entry.update({k: v for k, v in vars(record).items() if k not in self._skip and not k.startswith("_")})
        if record.exc_info:
            entry["error"] = self.formatException(record.exc_info)
        return json.dumps(entry, default=str)


def configure(level: str) -> None:
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(JsonFormatter())
    logging.basicConfig(level=level, handlers=[handler], force=True)
    logging.getLogger("alembic").setLevel(logging.WARNING)
    # slack_sdk builds the DEBUG lines of every Web API call (the whole request, the card's blocks, and
    # the response) whenever its client logger's *own* level is unset (it tests `logger.level`, not the
    # effective level), and the line is then dropped: 1.4 % of the server's samples in a burst of card
    # updates, about a tenth of a delivery. Its own level, set to ours, skips them unless we log DEBUG.
    logging.getLogger("slack_sdk.web.async_base_client").setLevel(level)
    # Bolt also reads SLACK_BOT_TOKEN itself and warns that the client we hand it wins; it does, by design.
    logging.getLogger("slack_bolt.AsyncApp").addFilter(lambda r: "`token` will be unused" not in r.getMessage())
