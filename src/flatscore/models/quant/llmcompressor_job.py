"""Run one llm-compressor recipe on a reference checkpoint and save the compressed-tensors result.

Runs inside the quantization environment (`make quant-env`), started as a script by
`flatscore.models.quant.toolchain`: it imports only the standard library, torch,
transformers, datasets and llm-compressor (never flatscore, which that environment lacks).

    python llmcompressor_job.py JOB.json

JOB.json: {"reference": DIR, "out": DIR, "stage": {...}, "calibration": FILE|null,
"max_sequence_length": N}; the calibration file holds token id lists (the agent transcripts,
tokenized by flatscore). Writes the checkpoint and `toolchain.json` (library versions,
seconds) into `out`.
"""

from __future__ import annotations

import json
import sys
import time
from importlib.metadata import version
from pathlib import Path

PACKAGES = ("llmcompressor", "compressed-tensors", "transformers", "torch")


def main(job_file: str) -> None:
    job = json.loads(Path(job_file).read_text())
    import torch
    import yaml
    from llmcompressor import oneshot
    from transformers import AutoModelForCausalLM, AutoTokenizer

    torch.manual_seed(0)
    if not torch.accelerator.is_available():
        # llm-compressor 0.14.0.1's AWQ pins its cached activations in page-locked memory
        # unconditionally (pipelines/cache.py), which raises "Cannot access accelerator
        # device when none is available" on a CPU-only host. Pinning only speeds copies to
        # a GPU: without one, skip it.
        from llmcompressor.pipelines.cache import IntermediatesCache

        IntermediatesCache.pin_memory = lambda self, *args, **kwargs: None
    start = time.perf_counter()
    model = AutoModelForCausalLM.from_pretrained(job["reference"], dtype=torch.float32)
    tokenizer = AutoTokenizer.from_pretrained(job["reference"])
    kwargs = {}
    if job["calibration"] is not None:
        from datasets import Dataset

        sequences = json.loads(Path(job["calibration"]).read_text())
        dataset = Dataset.from_dict(
            {"input_ids": sequences, "attention_mask": [[1] * len(s) for s in sequences]}
        )
        kwargs = {
            "dataset": dataset,
            "num_calibration_samples": len(sequences),
            "max_seq_length": job["max_sequence_length"],
        }
    oneshot(model=model, processor=tokenizer, recipe=yaml.safe_dump(job["stage"]), **kwargs)
    out = Path(job["out"])
    model.save_pretrained(out, save_compressed=True)
    tokenizer.save_pretrained(out)
    facts = {
        "libraries": {p: version(p) for p in PACKAGES},
        "seconds": round(time.perf_counter() - start, 1),
    }
    (out / "toolchain.json").write_text(json.dumps(facts, indent=1) + "\n")


if __name__ == "__main__":
    main(sys.argv[1])
