"""An engine that replays queued answers (simonw/llm's mock model idea), for stage tests that need exact model
output without a model."""

from __future__ import annotations

from collections.abc import Callable

from genenv_cli.machinery.engines.base import Engine, Generation


class ReplayEngine(Engine):
    name = "replay"

    def __init__(self, answer: Callable[[list[dict[str, str]], int], str], tag: str = "replay"):
        self.answer = answer
        self.model_tag = tag
        self.calls: list[list[list[dict[str, str]]]] = []

    def prompt_ids(self, messages):
        return [len(m["content"]) % 97 for m in messages]

    def generate(self, conversations, params, on_progress=None, seeds=None):
        self.calls.append(conversations)
        out = []
        for conv in conversations:
            gens = []
            for k in range(params.n):
                text = self.answer(conv, k)
                ids = [ord(c) % 251 for c in text][: params.max_new_tokens] or [0]
                gens.append(Generation(text=text, token_ids=ids, logprobs=[-0.5] * len(ids), finish_reason="stop",
                                       prompt_token_ids=self.prompt_ids(conv)))
            out.append(gens)
            if on_progress:
                on_progress(len(gens), sum(len(g.token_ids) for g in gens))
        return out


def patch_engine(monkeypatch, engine: ReplayEngine) -> None:
    import genenv_cli.machinery.engines as engines
    import genenv_cli.machinery.training.policy_loading  # noqa: F401 - imported now, it binds the real `resolve`, not the patch

    monkeypatch.setattr(engines, "open_engine", lambda *a, **k: engine)
    monkeypatch.setattr("genenv_cli.machinery.models.resolve", lambda name, tag=None: None)
