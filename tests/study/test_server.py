"""A study's `server:` arms: the spec a study file gives (merged from the model's shared
settings and each arm's own, the same flags across arms) and the command line each kind of
server is started with (known answers, argument by argument)."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import pytest

from flatscore.errors import InputError
from flatscore.models.servers import command_line
from flatscore.run.arm_backend import arm_backend
from flatscore.run.study import parse_study
from flatscore.study.server import ServerSpec, arm_servers, merged

PY = sys.executable


def study(model: dict[str, Any], base_dir: Path | None = None) -> Any:
    return parse_study(
        {"models": [{"name": "m", "kind": "openai", **model}], "domains": ["retail"]},
        file="s.yaml",
        base_dir=base_dir,
    )


def refused(model: dict[str, Any]) -> str:
    with pytest.raises(InputError) as err:
        study(model)
    return err.value.one_line()


def test_llama_cpp_command_line_known_answer() -> None:
    spec = ServerSpec(kind="llama-cpp", model="/w/a.gguf", threads=2, seed=7, args=("--x", "1"))
    assert command_line(spec, 8123, "m") == [
        PY, "-m", "llama_cpp.server",
        "--model", "/w/a.gguf", "--model_alias", "m",
        "--host", "127.0.0.1", "--port", "8123",
        "--n_ctx", "4096",
        "--n_threads", "2", "--n_threads_batch", "2",
        "--seed", "7",
        "--chat_format", "chatml-function-calling",
        "--x", "1",
    ]  # fmt: skip


def test_vllm_command_line_known_answer() -> None:
    spec = ServerSpec(
        kind="vllm",
        checkpoint="org/model-FP8",
        max_model_len=8192,
        chat_template="/w/t.jinja",
        gpu_memory_utilization=0.4,
        python="/opt/vllm/bin/python",
        args=("--quantization", "fp8"),
    )
    assert command_line(spec, 9000, "agent") == [
        "/opt/vllm/bin/python", "-m", "vllm.entrypoints.openai.api_server",
        "--model", "org/model-FP8", "--served-model-name", "agent",
        "--host", "127.0.0.1", "--port", "9000",
        "--max-model-len", "8192",
        "--seed", "0",
        "--max-logprobs", "20",
        "--generation-config", "vllm",
        "--enable-auto-tool-choice", "--tool-call-parser", "hermes",
        "--chat-template", "/w/t.jinja",
        "--gpu-memory-utilization", "0.4",
        "--quantization", "fp8",
    ]  # fmt: skip


def test_flatscore_serve_command_line_known_answer() -> None:
    spec = ServerSpec(kind="flatscore", model="embedded", quant="int8", engine="local")
    assert command_line(spec, 7000, "embedded@int8") == [
        PY, "-c", "from flatscore.cli import main; main()", "serve",
        "--kind", "local", "--model", "embedded", "--arm", "int8",
        "--port", "7000", "--threads", "1", "--name", "embedded@int8",
    ]  # fmt: skip


def test_arms_take_the_models_shared_flags_and_their_own_weights(tmp_path: Path) -> None:
    s = study(
        {
            "server": {"kind": "llama-cpp", "max_model_len": 2048, "args": ["--verbose", "0"]},
            "arms": {
                "ref": {"server": {"model": "ref.gguf"}},
                "q8": {"server": {"model": "/abs/q8.gguf", "args": ["--n_batch", "64"]}},
                "up": {"url": "http://127.0.0.1:1/v1", "served_model": "x"},
            },
        },
        base_dir=tmp_path,
    )
    model = s.models[0]
    ref, q8 = model.server_of("ref"), model.server_of("q8")
    assert ref is not None and q8 is not None and model.server_of("up") is None
    assert ref.model == str((tmp_path / "ref.gguf").resolve())  # the study file's folder
    assert q8.model == "/abs/q8.gguf" and ref.max_model_len == q8.max_model_len == 2048
    assert ref.args == ("--verbose", "0") and q8.args == ("--verbose", "0", "--n_batch", "64")
    backend = arm_backend(model, "q8", tmp_path)
    assert backend is not None and backend.server == q8
    assert backend.url is None and backend.served_model == "m"  # the model's name
    assert arm_backend(model, "up").server is None


def test_named_models_and_hub_ids_stay_as_given(tmp_path: Path) -> None:
    (tmp_path / "ckpt").mkdir()
    s = study(
        {
            "server": {"kind": "vllm"},
            "arms": {
                "hub": {"server": {"checkpoint": "org/name"}},
                "dir": {"server": {"checkpoint": "ckpt"}},
            },
        },
        base_dir=tmp_path,
    )
    model = s.models[0]
    assert model.server_of("hub").checkpoint == "org/name"
    assert model.server_of("dir").checkpoint == str((tmp_path / "ckpt").resolve())
    s = study({"arms": {"ref": {"server": {"kind": "llama-cpp", "model": "embedded-base"}}}})
    assert s.models[0].server_of("ref").model == "embedded-base"


@pytest.mark.parametrize(
    ("model", "message"),
    [
        (
            {
                "server": {"kind": "llama-cpp"},
                "arms": {
                    "a": {"server": {"model": "a.gguf", "seed": 1}},
                    "b": {"server": {"model": "b.gguf"}},
                },
            },
            "arms 'a' and 'b': servers differ in seed",
        ),
        ({"arms": {"a": {"server": {"model": "a.gguf"}}}}, "arm 'a': server needs 'kind'"),
        (
            {"arms": {"a": {"server": {"kind": "vllm", "model": "a.gguf"}}}},
            "arm 'a': a vllm server needs 'checkpoint'",
        ),
        (
            {"arms": {"a": {"server": {"kind": "llama-cpp", "model": "a", "max_logprobs": 5}}}},
            "arm 'a': not for a llama-cpp server: max_logprobs (vllm)",
        ),
        (
            {"arms": {"a": {"server": {"kind": "vllm", "checkpoint": "c", "chat_format": "x"}}}},
            "not for a vllm server: chat_format (llama-cpp)",
        ),
        (
            {"arms": {"a": {"url": "http://h/v1", "server": {"kind": "vllm", "checkpoint": "c"}}}},
            "arm 'a': give either url or server, not both",
        ),
        (
            {"arms": {"a": {"server": {"kind": "sglang", "checkpoint": "c"}}}},
            "models.0.arms.a.server.kind",
        ),
        (
            {"arms": {"a": {"server": {"kind": "vllm", "checkpoint": "c", "port": 0}}}},
            "models.0.arms.a.server.port",
        ),
    ],
)
def test_bad_server_specs_are_one_line_naming_the_arm(model: dict[str, Any], message: str) -> None:
    assert message in refused(model)


def test_server_arms_are_for_endpoint_models_only() -> None:
    with pytest.raises(InputError, match="server applies to kind openai only"):
        parse_study(
            {
                "models": [
                    {
                        "name": "m",
                        "kind": "embedded",
                        "arms": {"a": {"server": {"kind": "vllm", "checkpoint": "c"}}},
                    }
                ]
            }
        )


def test_merge_keeps_the_arms_own_over_the_shared() -> None:
    shared = ServerSpec(kind="vllm", max_model_len=1024, args=("--a",))
    own = ServerSpec(checkpoint="c", args=("--b",), port=9999)
    both = merged(shared, own)
    assert both is not None
    assert (both.kind, both.checkpoint, both.max_model_len) == ("vllm", "c", 1024)
    assert both.args == ("--a", "--b") and both.port == 9999
    assert merged(None, None) is None and merged(shared, None) == shared
    # ports and args may differ per arm; a shared flag may not
    assert set(arm_servers(shared, {"x": own, "y": ServerSpec(checkpoint="d")})) == {"x", "y"}
    with pytest.raises(ValueError, match="differ in max_model_len"):
        arm_servers(shared, {"x": own, "y": ServerSpec(checkpoint="d", max_model_len=9)})


def test_study_json_reads_back_the_same_servers(tmp_path: Path) -> None:
    """study.json records what each level gave, so the merge reads back the same (a
    default written out for an arm would override the model's shared setting)."""
    from flatscore.study import study_from_json, study_json

    s = study(
        {
            "server": {"kind": "llama-cpp", "max_model_len": 2048, "threads": 2},
            "arms": {"a": {"server": {"model": "a.gguf", "args": ["--x"]}}},
        },
        base_dir=tmp_path,
    )
    again = study_from_json(study_json(s)).models[0].server_of("a")
    assert again == s.models[0].server_of("a")
    assert again is not None and again.max_model_len == 2048
