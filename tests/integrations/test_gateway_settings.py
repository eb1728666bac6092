"""Gateway settings: ``litellm_params`` (or any gateway's own configuration) first, then the
``CITEGUARD_*`` environment variables ``citeguard serve`` reads; every bad value a clear
:class:`~citeguard.errors.PolicyError` naming it."""

from __future__ import annotations

from pathlib import Path

import pytest

from citeguard.errors import PolicyError
from citeguard.integrations.gateway import GatewaySettings, question_of


def test_params_win_over_the_environment(tmp_path: Path) -> None:
    env = {"CITEGUARD_ON_FAIL": "repair", "CITEGUARD_REDIS": "redis://r:6379/0"}
    s = GatewaySettings.load({"on_fail": "annotate", "redis": None}, env=env)
    assert (s.on_fail, s.redis, s.policy) == ("annotate", "redis://r:6379/0", None)


@pytest.mark.parametrize(
    ("word", "action"),
    [("raise", "block"), ("strip", "repair"), ("report", "annotate"), ("return", "annotate")],
)
def test_the_library_on_fail_words_name_gateway_actions(word: str, action: str) -> None:
    assert GatewaySettings.load(env={"CITEGUARD_ON_FAIL": word.upper()}).on_fail == action


def test_a_bad_on_fail_is_a_clear_error() -> None:
    with pytest.raises(PolicyError, match="on_fail must be one of annotate, block"):
        GatewaySettings.load({"on_fail": "shrug"}, env={})


def test_the_policy_file_is_read_and_checked(tmp_path: Path) -> None:
    good = tmp_path / "policy.json"
    good.write_text('{"min_citations": 2, "fetch": {"url_timeout": 4.0}}')
    policy = GatewaySettings.load(env={"CITEGUARD_POLICY": str(good)}).load_policy()
    assert (policy.min_citations, policy.fetch.url_timeout) == (2, 4.0)
    missing = GatewaySettings(policy=str(tmp_path / "nope.json"))
    with pytest.raises(PolicyError, match="cannot read the policy file"):
        missing.load_policy()
    bad = tmp_path / "bad.json"
    bad.write_text('{"min_citations": -1}')
    with pytest.raises(PolicyError, match="min_citations"):
        GatewaySettings(policy=str(bad)).load_policy()
    huge = tmp_path / "huge.json"
    huge.write_text(" " * 1_000_001)
    with pytest.raises(PolicyError, match="larger than"):
        GatewaySettings(policy=str(huge)).load_policy()


def test_no_settings_is_the_default_policy_and_block() -> None:
    s = GatewaySettings.load(env={})
    assert s.on_fail == "block" and s.load_policy().min_citations == 1


def test_the_question_is_the_last_user_message() -> None:
    messages = [
        {"role": "system", "content": "be brief"},
        {"role": "user", "content": "first"},
        {"role": "assistant", "content": "..."},
        {"role": "user", "content": [{"type": "text", "text": "how tall"}, {"type": "image"}]},
    ]
    assert question_of(messages) == "how tall"
    assert question_of("not messages") == "" and question_of(None) == ""
    assert len(question_of([{"role": "user", "content": "x" * 10_000}])) == 4_000
