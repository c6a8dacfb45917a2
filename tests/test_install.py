"""The locked environment is the validated GPU set, and verl's agent-loop modules import."""

from importlib.metadata import version

import pytest


def test_validated_versions():
    assert version("verl") == "0.9.0"
    assert version("torch").startswith("2.13.0")
    assert version("transformers") == "5.10.4"
    assert version("ray") == "2.58.0"
    assert version("transferqueue") == "0.1.10"
    assert int(version("mcp").split(".")[0]) == 2


@pytest.mark.filterwarnings("ignore")
def test_verl_agent_loop_modules_import():
    # verl 0.9.0 has no verl-core extra: these imports prove that what its agent loop needs is locked
    from verl.experimental.agent_loop.agent_loop import AgentLoopBase, AgentLoopOutput, register
    import transfer_queue  # noqa: F401
    import cachetools  # noqa: F401

    assert callable(register) and hasattr(AgentLoopBase, "run")
    assert "response_mask" in AgentLoopOutput.model_fields
