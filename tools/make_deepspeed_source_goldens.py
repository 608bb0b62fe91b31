#!/usr/bin/env python3
"""Writes tests/data/cli/deepspeed_sources.json: which DeepSpeed settings transformers 4.57.1 +
accelerate 1.11.0 put in force when an accelerate config and TrainingArguments' `deepspeed` are
both given, and what HfDeepSpeedConfig makes of a `deepspeed` string that names no file.

Run with the reference venv, DeepSpeed installed (CPU-only is enough: DS_BUILD_OPS=0
pip install --no-build-isolation deepspeed==0.18.2, the users' version):
    python tools/make_deepspeed_source_goldens.py

"combinations": each runs, in a fresh process, what `accelerate launch --config_file accel.yaml
sft.py` does before the script starts (accelerate's own launch_command, its launchers replaced by
one that keeps the environment they would give the script), then, under that environment,
TrainingArguments(deepspeed=…) and a Trainer on a tiny model (Trainer.create_accelerator_and_
postprocess builds the Accelerator), then the DeepSpeed config's trainer_config_finalize, which
deepspeed_init runs when train() starts. The outcome is the exception raised (type and message) or
the DeepSpeed settings in force: the Accelerator's distributed_type, whether the Trainer enabled
DeepSpeed / FSDP, and the active DeepSpeedPlugin's ZeRO stage, optimizer offload device,
gradient_accumulation_steps and bf16.enabled. Among them: a deepspeed_config_file that does not
exist or that zerotune would refuse (fp16) beside `deepspeed` (never opened), and a JSON whose
stage and offload devices are "auto" (DeepSpeedPlugin fills them). ACCELERATE_CONFIG_DS_FIELDS,
the accelerate config's deepspeed_config keys (and mixed_precision) that accelerate launch passes
on, is kept too.

"strings": transformers' HfDeepSpeedConfig(text) for strings that are no existing path (the
working directory is an empty one): the config it read, or the exception (type and message).

The machine has no GPU: transformers' bf16 check (is_torch_bf16_gpu_available) is answered yes,
as on the users' Ampere+ GPUs, and the FSDP case runs with FSDP_SYNC_MODULE_STATES and
FSDP_CPU_RAM_EFFICIENT_LOADING false (with either, FullyShardedDataParallelPlugin asks for the
current CUDA device); nothing else is changed.
"""
import base64
import json
import os
import random
import subprocess
import sys
import tempfile

OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "data", "cli")

# The users' accelerate config, as it is: ../shared/seed_configs beside the checkout.
SEED_CONFIG = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "shared",
                           "seed_configs", "sft_zero1_4gpu.yaml")
with open(SEED_CONFIG) as _f:
    SEED_ZERO1 = _f.read()

# trainer.deepspeed's JSON (written as ds.json) and the accelerate config's deepspeed_config_file
# (acc_ds.json): different stages and offload, so the outcome shows which one is in force.
TRAINER_DS = {
    "zero_optimization": {"stage": 2, "offload_optimizer": {"device": "none"}},
    "bf16": {"enabled": "auto"},
    "gradient_accumulation_steps": "auto",
    "train_micro_batch_size_per_gpu": "auto",
}
ACCELERATE_DS = {"zero_optimization": {"stage": 1, "offload_optimizer": {"device": "cpu"}}}
TRAINER_DS_WITHOUT_ZERO = {"bf16": {"enabled": "auto"}}
# A DeepSpeed JSON whose stage and offload devices are "auto" (ds_auto.json; acc_ds_auto.json as a
# deepspeed_config_file): accelerate's DeepSpeedPlugin fills them (fill_match) from its own fields.
TRAINER_DS_AUTO = {
    "zero_optimization": {"stage": "auto", "offload_optimizer": {"device": "auto"},
                          "offload_param": {"device": "auto"}},
    "bf16": {"enabled": "auto"},
}
ACCELERATE_DS_AUTO = {"zero_optimization": {"stage": "auto"},
                      "gradient_accumulation_steps": "auto"}
# A deepspeed_config_file with settings zerotune refuses (fp16), and one that does not exist
# (missing.json): neither is opened where trainer.deepspeed replaces it.
ACCELERATE_DS_FP16 = {"zero_optimization": {"stage": 1}, "fp16": {"enabled": True}}

# The files each combination's directory holds, by name.
FILES = {"ds.json": TRAINER_DS, "ds_no_zero.json": TRAINER_DS_WITHOUT_ZERO,
         "acc_ds.json": ACCELERATE_DS, "ds_auto.json": TRAINER_DS_AUTO,
         "acc_ds_auto.json": ACCELERATE_DS_AUTO, "acc_ds_fp16.json": ACCELERATE_DS_FP16}

# The trainer's arguments (the test's sft.yaml gives the same).
TRAINER_ARGS = {"per_device_train_batch_size": 2, "gradient_accumulation_steps": 4, "bf16": True}

COMBINATIONS = [
    # 1: the users' DeepSpeed accelerate config and trainer.deepspeed.
    ("seed_zero1", SEED_ZERO1, "file"),
    ("deepspeed_key", "distributed_type: DEEPSPEED\nnum_processes: 1\n"
     "deepspeed_config:\n  zero_stage: 2\n", "file"),
    ("deepspeed_gradient_accumulation", "distributed_type: DEEPSPEED\nnum_processes: 1\n"
     "deepspeed_config:\n  gradient_accumulation_steps: 4\n", "file"),
    ("mixed_precision_only", "distributed_type: DEEPSPEED\nnum_processes: 1\n"
     "mixed_precision: bf16\ndeepspeed_config:\n  zero3_init_flag: false\n", "file"),
    ("launcher_keys_only", "distributed_type: DEEPSPEED\nnum_processes: 1\n"
     "deepspeed_config:\n  deepspeed_multinode_launcher: standard\n  zero3_init_flag: false\n",
     "file"),
    # 2: the accelerate config's deepspeed_config_file and trainer.deepspeed.
    ("accelerate_json_file", "distributed_type: DEEPSPEED\nnum_processes: 1\n"
     "deepspeed_config:\n  deepspeed_config_file: acc_ds.json\n  zero3_init_flag: false\n",
     "file"),
    ("accelerate_json_file_missing", "distributed_type: DEEPSPEED\nnum_processes: 1\n"
     "deepspeed_config:\n  deepspeed_config_file: missing.json\n", "file"),
    ("accelerate_json_file_fp16", "distributed_type: DEEPSPEED\nnum_processes: 1\n"
     "deepspeed_config:\n  deepspeed_config_file: acc_ds_fp16.json\n", "file"),
    # 3: an accelerate config without DeepSpeed and trainer.deepspeed.
    ("multi_gpu", "distributed_type: MULTI_GPU\nnum_processes: 1\nmixed_precision: bf16\n", "file"),
    ("no_distributed", "distributed_type: NO\nnum_processes: 1\n", "file"),
    ("fsdp", "distributed_type: FSDP\nnum_processes: 1\n"
     "fsdp_config:\n  fsdp_sharding_strategy: FULL_SHARD\n", "file"),
    # 4: trainer.deepspeed as a base64 string beside an accelerate config.
    ("multi_gpu_base64", "distributed_type: MULTI_GPU\nnum_processes: 1\n", "base64"),
    # trainer.deepspeed alone; one without zero_optimization.
    ("trainer_alone", None, "file"),
    ("trainer_without_zero_optimization", None, "no_zero"),
    # A stage and offload of "auto": alone, beside MULTI_GPU, and as a deepspeed_config_file.
    ("trainer_auto_stage", None, "auto"),
    ("multi_gpu_auto_stage", "distributed_type: MULTI_GPU\nnum_processes: 1\n", "auto"),
    ("accelerate_json_auto_stage_alone", "distributed_type: DEEPSPEED\nnum_processes: 1\n"
     "deepspeed_config:\n  deepspeed_config_file: acc_ds_auto.json\n", None),
    # The accelerate config alone, for comparison; one that names no ZeRO stage.
    ("seed_zero1_alone", SEED_ZERO1, None),
    ("accelerate_json_file_alone", "distributed_type: DEEPSPEED\nnum_processes: 1\n"
     "deepspeed_config:\n  deepspeed_config_file: acc_ds.json\n", None),
    ("accelerate_no_stage_alone", "distributed_type: DEEPSPEED\nnum_processes: 1\n"
     "deepspeed_config:\n  zero3_init_flag: false\n", None),
    ("accelerate_no_section_alone", "distributed_type: DEEPSPEED\nnum_processes: 1\n", None),
]


def b64(text):
    return base64.urlsafe_b64encode(text.encode("utf-8")).decode("ascii")


def string_cases():
    zero3 = '{"zero_optimization": {"stage": 3}}'
    cases = [
        ' {"zero_optimization": {"stage": 2}}',
        '\n{"zero_optimization": {"stage": "2"}, "bf16": {"enabled": "true"}}\t ',
        '{"a": 1, "a": 2, "zero_optimization": {}}',
        "[1, 2]", "5", "null", '"x"', "true",
        b64(zero3), b64(zero3).rstrip("="), b64(zero3) + "junk",
        b64('{"zero_optimization": {"stage": 1}, "x": "??>>~~"}'),
        base64.b64encode(b'{"zero_optimization": {"stage": 1}, "x": "??>>~~"}').decode(),
        b64("[1]"), b64("hello"), b64("\ufeff" + zero3), b64(" " + zero3 + " "),
        base64.urlsafe_b64encode(b'\xff\xfe{}').decode(),
        base64.urlsafe_b64encode(b'{"s": "\xed\xa0\x80"}').decode(),
        "e30=", "e30", "e3=0", "=e30=", "e30==", "e30===x", "e3 0=", "e.3.0.=",
        "ds.json", "no such file.json", "AAAA", "====", "A", "AB", "ABC=", "é", "e30=é",
    ]
    # Mutations of a base64 JSON: '=' and other characters inserted, characters dropped, the two
    # alphabets mixed: the decoder's padding and skipping rules.
    rng = random.Random(1234)
    base = b64('{"zero_optimization": {"stage": 2}, "gradient_clipping": 1.0, "k": "~~??"}')
    for _ in range(160):
        s = list(base)
        for _ in range(rng.randint(1, 3)):
            op = rng.randrange(4)
            at = rng.randrange(len(s) + 1)
            if op == 0:
                s.insert(at, "=" * rng.randint(1, 3))
            elif op == 1:
                s.insert(at, rng.choice(" \n.!*$\t"))
            elif op == 2 and s:
                del s[min(at, len(s) - 1)]
            else:
                s = [{"-": "+", "_": "/"}.get(ch, ch) for ch in s]
        cases.append("".join(s))
    seen, out = set(), []
    for c in cases:
        if c not in seen:
            seen.add(c)
            out.append(c)
    return out


def run_strings():
    from transformers.integrations.deepspeed import HfDeepSpeedConfig

    results = []
    with tempfile.TemporaryDirectory() as d:
        os.chdir(d)
        for text in string_cases():
            assert not os.path.exists(text)
            try:
                results.append({"text": text, "config": HfDeepSpeedConfig(text).config})
            except Exception as e:  # noqa: BLE001 - the exception is the golden
                results.append({"text": text, "error": type(e).__name__, "message": str(e)})
    return results


def launch_env(accelerate_yaml):
    """The environment `accelerate launch --config_file accelerate_yaml sft.py` gives sft.py."""
    import accelerate.commands.launch as launch
    from accelerate.utils.launch import (prepare_deepspeed_cmd_env, prepare_multi_gpu_env,
                                         prepare_simple_launcher_cmd_env)

    kept = {}
    launch.deepspeed_launcher = lambda a: kept.update(prepare_deepspeed_cmd_env(a)[1])
    launch.multi_gpu_launcher = lambda a: kept.update(prepare_multi_gpu_env(a))
    launch.simple_launcher = lambda a: kept.update(prepare_simple_launcher_cmd_env(a)[1])
    args = launch.launch_command_parser().parse_args(["--config_file", accelerate_yaml, "sft.py"])
    launch.launch_command(args)
    return {k: v for k, v in kept.items() if k.startswith(("ACCELERATE_", "FSDP_"))}


def run_combination(name, accelerate_yaml, deepspeed):
    """In this process: one combination's outcome (see the module's comment)."""
    import torch
    from accelerate.utils import DistributedType

    with tempfile.TemporaryDirectory() as d:
        os.chdir(d)
        for file, settings in FILES.items():
            with open(file, "w") as f:
                json.dump(settings, f)
        for k in [k for k in os.environ if k.startswith(("ACCELERATE_", "FSDP_"))]:
            del os.environ[k]
        env = {}
        if accelerate_yaml is not None:
            with open("accel.yaml", "w") as f:
                f.write(accelerate_yaml)
            env = launch_env("accel.yaml")
        os.environ.update(env)
        for k in ("FSDP_SYNC_MODULE_STATES", "FSDP_CPU_RAM_EFFICIENT_LOADING"):
            if k in env:
                os.environ[k] = "false"  # no device here (see the top)
        import transformers.training_args as training_args
        from transformers import PretrainedConfig, PreTrainedModel, Trainer, TrainingArguments

        training_args.is_torch_bf16_gpu_available = lambda *a, **k: True

        class TinyConfig(PretrainedConfig):
            model_type = "tiny"

        class Tiny(PreTrainedModel):
            config_class = TinyConfig

            def __init__(self, config):
                super().__init__(config)
                self.linear = torch.nn.Linear(2, 2)

        value = {"file": "ds.json", "no_zero": "ds_no_zero.json", "auto": "ds_auto.json",
                 "base64": b64(json.dumps(TRAINER_DS)), None: None}[deepspeed]
        out = {"name": name, "accelerate": accelerate_yaml, "deepspeed": deepspeed,
               "deepspeed_value": value,
               "ACCELERATE_CONFIG_DS_FIELDS": env.get("ACCELERATE_CONFIG_DS_FIELDS")}
        try:
            args = TrainingArguments(output_dir=os.path.join(d, "out"), deepspeed=value,
                                     report_to=[], **TRAINER_ARGS)
            model = Tiny(TinyConfig())
            trainer = Trainer(model=model, args=args)
            state = trainer.accelerator.state
            if state.distributed_type == DistributedType.DEEPSPEED:
                # What deepspeed_init does first when train() starts: the values that differ
                # from the trainer's are refused there.
                state.deepspeed_plugin.hf_ds_config.trainer_config_finalize(args, model, 1)
        except Exception as e:  # noqa: BLE001 - the exception is the golden
            out.update(error=type(e).__name__, message=str(e))
            return out
        out["distributed_type"] = str(state.distributed_type).split(".")[-1]
        out["is_deepspeed_enabled"] = trainer.is_deepspeed_enabled
        out["is_fsdp_enabled"] = trainer.is_fsdp_enabled
        if state.distributed_type == DistributedType.DEEPSPEED:
            plugin = state.deepspeed_plugin
            cfg = plugin.deepspeed_config
            out["zero_stage"] = cfg["zero_optimization"]["stage"]
            out["offload_optimizer_device"] = (
                cfg["zero_optimization"].get("offload_optimizer", {}).get("device", "none"))
            out["offload_param_device"] = (
                cfg["zero_optimization"].get("offload_param", {}).get("device", "none"))
            out["gradient_accumulation_steps"] = cfg.get("gradient_accumulation_steps")
            out["bf16_enabled"] = cfg.get("bf16", {}).get("enabled")
        return out


def main():
    if len(sys.argv) == 3 and sys.argv[1] == "--one":
        name, accelerate_yaml, deepspeed = json.loads(sys.argv[2])
        print("RESULT " + json.dumps(run_combination(name, accelerate_yaml, deepspeed)))
        return
    import accelerate
    import deepspeed
    import transformers

    assert transformers.__version__ == "4.57.1", transformers.__version__
    assert accelerate.__version__ == "1.11.0", accelerate.__version__
    combinations = []
    for c in COMBINATIONS:
        p = subprocess.run([sys.executable, os.path.abspath(__file__), "--one", json.dumps(c)],
                           capture_output=True, text=True, check=True)
        line = [x for x in p.stdout.splitlines() if x.startswith("RESULT ")]
        assert line, p.stdout + p.stderr
        combinations.append(json.loads(line[-1][len("RESULT "):]))
    cwd = os.getcwd()
    strings = run_strings()
    os.chdir(cwd)
    with open(os.path.join(OUT, "deepspeed_sources.json"), "w") as f:
        json.dump({"generator": "tools/make_deepspeed_source_goldens.py",
                   "transformers": transformers.__version__,
                   "accelerate": accelerate.__version__, "deepspeed": deepspeed.__version__,
                   "trainer_deepspeed": TRAINER_DS,
                   "trainer_deepspeed_without_zero_optimization": TRAINER_DS_WITHOUT_ZERO,
                   "accelerate_deepspeed_config_file": ACCELERATE_DS, "files": FILES,
                   "trainer_args": TRAINER_ARGS, "combinations": combinations,
                   "strings": strings}, f, indent=1, ensure_ascii=False)
        f.write("\n")
    for c in combinations:
        print(c["name"], c.get("error") or (c.get("distributed_type"), c.get("zero_stage"),
                                             c.get("offload_optimizer_device")))
    print(len(strings), "strings,", sum("config" in s for s in strings), "read")


if __name__ == "__main__":
    main()
