"""Issue 14 regressions on the litellm path (importing litellm takes seconds: slow)."""

from __future__ import annotations

import pytest

from rubric_reward.judges import Judge, JudgeConfig

try:
    from ._clients_fixtures import fresh_limiters, litellm_module  # noqa: F401
except ImportError:  # pragma: no cover
    from _clients_fixtures import fresh_limiters, litellm_module  # noqa: F401

pytestmark = [pytest.mark.slow, pytest.mark.timeout(120)]

KEY = "sk-" + "".join(f"{i:03d}z" for i in range(100))


def test_litellm_error_text_is_redacted_before_it_is_cut(litellm_module, monkeypatch):
    monkeypatch.setenv("RR_AUDIT_LITELLM_KEY", KEY)
    config = JudgeConfig(model="openai/judge", backend="litellm", base_url="http://127.0.0.1:9/v1",
                         api_key_env="RR_AUDIT_LITELLM_KEY")
    backend = Judge(config).backend
    exc = type("AuthenticationError", (Exception,), {})("gateway echo: " + "h" * 270 + " key=" + KEY)
    error, _ = backend._error(exc)
    assert "[redacted]" in error.message
    assert not any(KEY[i : i + 8] in error.message for i in range(len(KEY) - 7))


def test_a_provider_model_without_its_key_fails_before_the_first_call(litellm_module, monkeypatch):
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    with pytest.raises(ValueError, match="OPENAI_API_KEY"):
        Judge(JudgeConfig(model="openai/gpt-4.1-mini"))
    monkeypatch.delenv("RR_UNSET_KEY", raising=False)
    with pytest.raises(ValueError, match="RR_UNSET_KEY"):
        Judge(JudgeConfig(model="openai/gpt-4.1-mini", api_key_env="RR_UNSET_KEY"))
    Judge(JudgeConfig(model="hosted_vllm/qwen", base_url="http://127.0.0.1:9/v1"))  # a local server needs none
