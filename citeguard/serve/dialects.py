"""The three wire formats the proxy speaks: OpenAI Chat Completions, OpenAI Responses and
Anthropic Messages. Each dialect knows, of its own requests and answers: the user's question,
how to add the guard's feedback as a message, how to put a repaired text back into an answer,
and, of its stream events, which carry answer text, which carry citation objects, which end the
stream, and where the final verdict goes.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Mapping
from typing import Any

from citeguard.stream_adapters import text_of

__all__ = ["ANTHROPIC", "CHAT", "DIALECTS", "RESPONSES", "Dialect"]


def _text_of_content(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        parts = []
        for block in content:
            if isinstance(block, Mapping) and isinstance(block.get("text"), str):
                parts.append(block["text"])
            elif isinstance(block, str):
                parts.append(block)
        return "\n".join(parts)
    return ""


def _last_user(messages: Any) -> str:
    if isinstance(messages, list):
        for m in reversed(messages):
            if isinstance(m, Mapping) and m.get("role") == "user":
                return _text_of_content(m.get("content"))[:4000]
    return ""


def _kept(annotations: Any, drop: frozenset[str], length: int) -> list[Any]:
    """Annotations whose URL is not dropped and whose span lies inside the new text."""
    out = []
    for a in annotations if isinstance(annotations, list) else ():
        inner = a.get("url_citation") if isinstance(a, Mapping) else None
        data = inner if isinstance(inner, Mapping) else a
        if not isinstance(data, Mapping) or data.get("url") in drop:
            continue
        end = data.get("end_index")
        if isinstance(end, int) and end > length:
            continue
        out.append(a)
    return out


def _annotated(response: Mapping[str, Any]) -> bool:
    """Whether a Responses API response's output text carries annotations."""
    for item in response.get("output") or []:
        for part in (item.get("content") or []) if isinstance(item, Mapping) else []:
            if isinstance(part, Mapping) and part.get("annotations"):
                return True
    return False


class Dialect:
    """One wire format; see the module docstring."""

    name: str
    path: str
    flavor: str = "openai"
    #: citation events come before the text they cite (Anthropic) rather than after (OpenAI)
    cite_before_text: bool = False
    #: citation events come after the text they cite (OpenAI annotations): in hold mode a
    #: sentence that cites nothing inline waits for the final check (``late_citations``)
    cite_after_text: bool = False

    def question(self, body: Mapping[str, Any]) -> str:
        return _last_user(body.get("messages"))

    def with_feedback(self, body: Mapping[str, Any], feedback: str) -> dict[str, Any]:
        out = dict(body)
        messages = list(body.get("messages") or [])
        messages.append({"role": "user", "content": feedback})
        out["messages"] = messages
        return out

    def rewrite(self, response: dict[str, Any], text: str, drop: frozenset[str]) -> dict[str, Any]:
        """``response`` with its answer text replaced by ``text`` (a repaired or stripped
        answer); citation objects of dropped URLs, or past the new text, removed."""
        raise NotImplementedError

    def filtered(self, response: dict[str, Any]) -> dict[str, Any]:
        """``response`` marked the way the API marks an answer its own content filter cut:
        Chat ``finish_reason: "content_filter"``, Responses ``status: "incomplete"`` with
        ``incomplete_details.reason: "content_filter"``, Anthropic ``stop_reason: "refusal"``."""
        raise NotImplementedError

    def split_end(self, data: Any) -> tuple[Any, Any] | None:
        """An event that carries answer text *and* ends the answer, as two events (its text,
        then its ending), so that the ending can be held back; None for any other event."""
        return None

    # ---- streams

    def event_text(self, data: Any) -> str:
        try:
            return text_of(data)
        except Exception:
            return ""

    def text_key(self, data: Mapping[str, Any]) -> Any:
        """Which part of the answer a text event writes to."""
        return 0

    def with_text(self, data: Mapping[str, Any], text: str) -> dict[str, Any]:
        """A copy of a text event carrying ``text`` instead."""
        raise NotImplementedError

    def citation_urls(self, data: Any) -> list[str]:
        """The URLs of the citation objects an event carries (none for most events)."""
        return []

    def is_terminal(self, event: str | None, data: Any, raw: str) -> bool:
        """An event that ends the stream (held back until the verdict is in)."""
        raise NotImplementedError

    def is_last(self, event: str | None, data: Any, raw: str) -> bool:
        """The very last event: nothing is read after it."""
        return self.is_terminal(event, data, raw)

    def verdict_events(
        self, event: str | None, data: Any, raw: str, verdict: Mapping[str, Any]
    ) -> list[tuple[str | None, Any]]:
        """What to send in place of a terminal event, the verdict included; when
        ``verdict["_filtered"]``, the stream ends as :meth:`filtered` marks an answer."""
        raise NotImplementedError

    def rewrite_done(self, event: str | None, data: Any, released: Mapping[Any, str]) -> Any:
        """A structural event that repeats the answer's text, with only ``released`` text
        (hold mode, text held back)."""
        return data

    def assemble(self, events: list[tuple[str | None, Any]]) -> dict[str, Any] | None:
        """The whole answer as a (non-streamed) response, from its events, to check citation
        objects with; None when it carried none."""
        return None


class ChatDialect(Dialect):
    name = "chat.completions"
    path = "/v1/chat/completions"
    cite_after_text = True  # a delta's annotations, after the content they cite

    def rewrite(self, response: dict[str, Any], text: str, drop: frozenset[str]) -> dict[str, Any]:
        out = copy.deepcopy(response)
        for choice in out.get("choices") or []:
            msg = choice.get("message") if isinstance(choice, dict) else None
            if isinstance(msg, dict) and choice.get("index", 0) == 0:
                msg["content"] = text
                if "annotations" in msg:
                    msg["annotations"] = _kept(msg["annotations"], drop, len(text))
        return out

    def filtered(self, response: dict[str, Any]) -> dict[str, Any]:
        out = copy.deepcopy(response)
        for choice in out.get("choices") or []:
            if isinstance(choice, dict):
                choice["finish_reason"] = "content_filter"
        return out

    @staticmethod
    def _finishes(data: Any) -> bool:
        return isinstance(data, Mapping) and any(
            isinstance(c, Mapping) and c.get("finish_reason") for c in data.get("choices") or []
        )

    def split_end(self, data: Any) -> tuple[Any, Any] | None:
        if not self._finishes(data) or not self.event_text(data):
            return None
        text, end = copy.deepcopy(dict(data)), copy.deepcopy(dict(data))
        for choice in text.get("choices") or []:
            if isinstance(choice, dict):
                choice["finish_reason"] = None
        for choice in end.get("choices") or []:
            if isinstance(choice, dict):
                choice["delta"] = {}
        return text, end

    def with_text(self, data: Mapping[str, Any], text: str) -> dict[str, Any]:
        out = copy.deepcopy(dict(data))
        for choice in out.get("choices") or []:
            if choice.get("index", 0) == 0 and isinstance(choice.get("delta"), dict):
                choice["delta"]["content"] = text
                choice["delta"].pop("annotations", None)
        return out

    def _annotations(self, data: Any) -> list[Any]:
        out: list[Any] = []
        if isinstance(data, Mapping):
            for choice in data.get("choices") or []:
                delta = choice.get("delta") if isinstance(choice, Mapping) else None
                if isinstance(delta, Mapping) and isinstance(delta.get("annotations"), list):
                    out.extend(delta["annotations"])
        return out

    def citation_urls(self, data: Any) -> list[str]:
        urls = []
        for a in self._annotations(data):
            inner = a.get("url_citation") if isinstance(a, Mapping) else None
            d = inner if isinstance(inner, Mapping) else a
            if isinstance(d, Mapping) and isinstance(d.get("url"), str):
                urls.append(d["url"])
        return urls

    def is_terminal(self, event: str | None, data: Any, raw: str) -> bool:
        # the chunk with the finish reason is held back with [DONE]: it says how the answer
        # ended, which the verdict decides
        return raw.strip() == "[DONE]" or (self._finishes(data) and not self.event_text(data))

    def is_last(self, event: str | None, data: Any, raw: str) -> bool:
        return raw.strip() == "[DONE]"

    def verdict_events(
        self, event: str | None, data: Any, raw: str, verdict: Mapping[str, Any]
    ) -> list[tuple[str | None, Any]]:
        if isinstance(data, Mapping):  # the finish chunk, or one after it (usage)
            ends = verdict.get("_filtered") and self._finishes(data)
            return [(event, self.filtered(dict(data)) if ends else data)]
        chunk = {
            "id": verdict.get("_id", "citeguard"),
            "object": "chat.completion.chunk",
            "created": verdict.get("_created", 0),
            "model": verdict.get("_model", ""),
            "choices": [],
            "citeguard": {k: v for k, v in verdict.items() if not k.startswith("_")},
        }
        return [(None, chunk), (None, "[DONE]")]

    def assemble(self, events: list[tuple[str | None, Any]]) -> dict[str, Any] | None:
        text, annotations, seen = [], [], set()
        for _, data in events:
            if not isinstance(data, Mapping):
                continue  # "[DONE]": no answer text (text_of reads a bare string as text)
            text.append(self.event_text(data))
            for a in self._annotations(data):
                key = json.dumps(a, sort_keys=True)
                if key not in seen:  # providers repeat annotations: read leniently, once
                    seen.add(key)
                    annotations.append(a)
        if not annotations:
            return None
        message = {"role": "assistant", "content": "".join(text), "annotations": annotations}
        return {"object": "chat.completion", "choices": [{"index": 0, "message": message}]}


class ResponsesDialect(Dialect):
    name = "responses"
    path = "/v1/responses"
    cite_after_text = True  # response.output_text.annotation.added, after its text delta
    _DONE = ("response.output_text.done", "response.content_part.done", "response.output_item.done")

    def question(self, body: Mapping[str, Any]) -> str:
        inp = body.get("input")
        if isinstance(inp, str):
            return inp[:4000]
        return _last_user(inp)

    def with_feedback(self, body: Mapping[str, Any], feedback: str) -> dict[str, Any]:
        out = dict(body)
        inp = body.get("input")
        items: list[Any] = (
            [{"role": "user", "content": inp}] if isinstance(inp, str) else list(inp or [])
        )
        items.append({"role": "user", "content": feedback})
        out["input"] = items
        return out

    def _rewrite_message(
        self, item: Any, texts: Mapping[Any, str] | str, drop: frozenset[str]
    ) -> None:
        if not isinstance(item, dict) or item.get("type") != "message":
            return
        parts = [p for p in item.get("content") or [] if isinstance(p, dict)]
        for n, part in enumerate(p for p in parts if p.get("type") == "output_text"):
            if isinstance(texts, str):
                new = texts if n == 0 else ""
            else:
                new = texts.get((item.get("id"), parts.index(part)), "")
            part["text"] = new
            part["annotations"] = _kept(part.get("annotations"), drop, len(new))

    def rewrite(self, response: dict[str, Any], text: str, drop: frozenset[str]) -> dict[str, Any]:
        out = copy.deepcopy(response)
        first = True
        for item in out.get("output") or []:
            if isinstance(item, dict) and item.get("type") == "message":
                self._rewrite_message(item, text if first else "", drop)
                first = False
        if "output_text" in out:
            out["output_text"] = text
        return out

    def filtered(self, response: dict[str, Any]) -> dict[str, Any]:
        out = copy.deepcopy(response)
        out["status"] = "incomplete"
        out["incomplete_details"] = {"reason": "content_filter"}
        for item in out.get("output") or []:
            if isinstance(item, dict) and item.get("type") == "message":
                item["status"] = "incomplete"
        return out

    def text_key(self, data: Mapping[str, Any]) -> Any:
        return (data.get("item_id"), data.get("content_index", 0))

    def with_text(self, data: Mapping[str, Any], text: str) -> dict[str, Any]:
        out = dict(data)
        out["delta"] = text
        return out

    def citation_urls(self, data: Any) -> list[str]:
        if (
            isinstance(data, Mapping)
            and data.get("type") == "response.output_text.annotation.added"
        ):
            ann = data.get("annotation")
            if isinstance(ann, Mapping) and isinstance(ann.get("url"), str):
                return [ann["url"]]
        return []

    def is_terminal(self, event: str | None, data: Any, raw: str) -> bool:
        kind = data.get("type") if isinstance(data, Mapping) else event
        return kind in ("response.completed", "response.failed", "response.incomplete")

    def verdict_events(
        self, event: str | None, data: Any, raw: str, verdict: Mapping[str, Any]
    ) -> list[tuple[str | None, Any]]:
        out = dict(data) if isinstance(data, Mapping) else {}
        shown = {k: v for k, v in verdict.items() if not k.startswith("_")}
        if verdict.get("_filtered") and out.get("type") == "response.completed":
            event = "response.incomplete"
            out["type"] = event
            if isinstance(out.get("response"), Mapping):
                out["response"] = self.filtered(dict(out["response"]))
        if isinstance(out.get("response"), Mapping):
            out["response"] = {**out["response"], "citeguard": shown}
        out["citeguard"] = shown
        return [(event, out)]

    def rewrite_done(self, event: str | None, data: Any, released: Mapping[Any, str]) -> Any:
        if not isinstance(data, Mapping):
            return data
        kind = data.get("type")
        out = copy.deepcopy(dict(data))
        key = (out.get("item_id"), out.get("content_index", 0))
        if kind == "response.output_text.done":
            out["text"] = released.get(key, "")
        elif kind == "response.content_part.done" and isinstance(out.get("part"), dict):
            new = released.get(key, "")
            out["part"]["text"] = new
            out["part"]["annotations"] = _kept(
                out["part"].get("annotations"), frozenset(), len(new)
            )
        elif kind == "response.output_item.done":
            self._rewrite_message(out.get("item"), released, frozenset())
        elif kind in ("response.completed", "response.failed", "response.incomplete"):
            for item in (out.get("response") or {}).get("output") or []:
                self._rewrite_message(item, released, frozenset())
        return out

    def assemble(self, events: list[tuple[str | None, Any]]) -> dict[str, Any] | None:
        cited = any(self.citation_urls(d) for _, d in events)
        for _, data in reversed(events):
            if isinstance(data, Mapping) and data.get("type") == "response.completed":
                response = data.get("response")
                # the truth: some gateways drop annotation events, and keep the annotations here
                if isinstance(response, dict) and (cited or _annotated(response)):
                    return response
                return None
        return None


class AnthropicDialect(Dialect):
    name = "messages"
    path = "/v1/messages"
    flavor = "anthropic"
    cite_before_text = True

    def rewrite(self, response: dict[str, Any], text: str, drop: frozenset[str]) -> dict[str, Any]:
        out = copy.deepcopy(response)
        blocks = [
            b
            for b in out.get("content") or []
            if not (isinstance(b, dict) and b.get("type") == "text")
        ]
        # no empty text block: the API refuses one when a client sends the message back
        out["content"] = [*blocks, {"type": "text", "text": text}] if text else blocks
        return out

    def filtered(self, response: dict[str, Any]) -> dict[str, Any]:
        out = copy.deepcopy(response)
        out["stop_reason"] = "refusal"
        out["stop_sequence"] = None
        return out

    def text_key(self, data: Mapping[str, Any]) -> Any:
        return data.get("index", 0)

    def with_text(self, data: Mapping[str, Any], text: str) -> dict[str, Any]:
        out = dict(data)
        out["delta"] = {"type": "text_delta", "text": text}
        return out

    def citation_urls(self, data: Any) -> list[str]:
        if isinstance(data, Mapping) and data.get("type") == "content_block_delta":
            delta = data.get("delta")
            if isinstance(delta, Mapping) and delta.get("type") == "citations_delta":
                cit = delta.get("citation")
                if isinstance(cit, Mapping) and isinstance(cit.get("url"), str):
                    return [cit["url"]]
                return [""]  # a document citation: still a citation object
        return []

    def is_terminal(self, event: str | None, data: Any, raw: str) -> bool:
        kind = data.get("type") if isinstance(data, Mapping) else event
        return kind in ("message_delta", "message_stop")

    def is_last(self, event: str | None, data: Any, raw: str) -> bool:
        kind = data.get("type") if isinstance(data, Mapping) else event
        return kind == "message_stop"

    def verdict_events(
        self, event: str | None, data: Any, raw: str, verdict: Mapping[str, Any]
    ) -> list[tuple[str | None, Any]]:
        if isinstance(data, Mapping) and data.get("type") == "message_delta":
            shown = {k: v for k, v in verdict.items() if not k.startswith("_")}
            out = {**data, "citeguard": shown}
            if verdict.get("_filtered"):
                delta = data.get("delta")
                delta = dict(delta) if isinstance(delta, Mapping) else {}
                out["delta"] = {**delta, "stop_reason": "refusal", "stop_sequence": None}
            return [(event, out)]
        return [(event, data)]

    def assemble(self, events: list[tuple[str | None, Any]]) -> dict[str, Any] | None:
        blocks: dict[int, dict[str, Any]] = {}
        message: dict[str, Any] = {"type": "message", "role": "assistant", "content": []}
        cited = False
        for _, data in events:
            if not isinstance(data, Mapping):
                continue
            kind = data.get("type")
            if kind == "message_start" and isinstance(data.get("message"), Mapping):
                message.update({k: v for k, v in data["message"].items() if k != "content"})
            elif kind == "content_block_start" and isinstance(data.get("content_block"), Mapping):
                blocks[int(data.get("index", 0))] = copy.deepcopy(dict(data["content_block"]))
            elif kind == "content_block_delta":
                block = blocks.setdefault(int(data.get("index", 0)), {"type": "text", "text": ""})
                delta = data.get("delta") or {}
                if delta.get("type") == "text_delta":
                    block["text"] = block.get("text", "") + str(delta.get("text", ""))
                elif delta.get("type") == "citations_delta":
                    cited = True
                    block.setdefault("citations", []).append(delta.get("citation"))
        if not cited:
            return None
        message["content"] = [blocks[i] for i in sorted(blocks)]
        return message


CHAT = ChatDialect()
RESPONSES = ResponsesDialect()
ANTHROPIC = AnthropicDialect()
DIALECTS = {d.path: d for d in (CHAT, RESPONSES, ANTHROPIC)}
