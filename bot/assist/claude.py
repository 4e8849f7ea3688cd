"""The model behind AI notes and thread answers: one Messages API call, bounded in time, no tools.

Made with the real `anthropic` client (ANTHROPIC_API_KEY, ANTHROPIC_BASE_URL), without the
client's own retries: a note that cannot be had in `timeout` seconds is not worth a second try, the
card is already there without it. Every failure is one `ModelFailed` whose text says why in one
line (for one log line); the caller decides what that means (no note).
"""

from __future__ import annotations

import asyncio
from typing import Any

from bot.domain.assist import Completion, ModelFailed, Prompt


class Claude:
    def __init__(self, *, api_key: str, base_url: str | None, model: str, timeout: float) -> None:
        import anthropic  # here, not at import: a server without a key never loads the SDK

        self.model = model
        self.timeout = timeout
        self._anthropic = anthropic
        self._client = anthropic.AsyncAnthropic(api_key=api_key, base_url=base_url, max_retries=0,
                                                timeout=timeout)

    async def complete(self, prompt: Prompt) -> Completion:
        """The model's text for `prompt` (a system prompt and one user turn; no tools)."""
        try:
            async with asyncio.timeout(self.timeout):
                reply: Any = await self._client.messages.create(
                    model=self.model, max_tokens=prompt.max_tokens, system=prompt.system,
                    messages=[{"role": "user", "content": prompt.user}])
        except (TimeoutError, self._anthropic.APITimeoutError):
            raise ModelFailed("timeout", f"no answer within {self.timeout:g}s") from None
        except self._anthropic.APIStatusError as exc:
            raise ModelFailed("error", f"HTTP {exc.status_code}: {_first_line(str(exc))}") from None
        except self._anthropic.APIError as exc:
            raise ModelFailed("error", f"{type(exc).__name__}: {_first_line(str(exc))}") from None
        text = "".join(getattr(block, "text", "") for block in reply.content if block.type == "text").strip()
        if not text:
            raise ModelFailed("empty", f"the reply had no text (stop_reason {reply.stop_reason})")
        return Completion(text, str(reply.model), int(reply.usage.input_tokens), int(reply.usage.output_tokens))

    async def close(self) -> None:
        await self._client.close()


def _first_line(text: str) -> str:
    return (text.splitlines() or [""])[0][:300]
