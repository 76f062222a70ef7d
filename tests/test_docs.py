"""Docs that cannot rot: every `python -m seqforecast...` command in the README and docs/ is
composed and checked as its CLI would (no training), every script command names a script and
options it has, every link between the pages leads to a file and a heading that exist, and
the attention study's table on the published PatchTST and the speed tables are the reports
they were printed from."""

import json
import os
import re
import shlex
from functools import cache
from pathlib import Path

import pytest
from omegaconf import OmegaConf

from seqforecast import compare, evaluate, predict, study
from seqforecast.config import compose_config, validate_config
from seqforecast.datasets import cli as data_cli
from seqforecast.published import published_overrides
from seqforecast.studies.grid import load_study

from .cli_helpers import REPO, load_script, run_fresh, run_script
from .model.helpers import composed  # the pages' commands: composed by two tests

PAGES = [REPO / "README.md", *sorted((REPO / "docs").rglob("*.md"))]


def _study(args: list[str]) -> None:
    """A study command: its arguments parse, and the study it names loads (its grid; a file's
    path is the repository's, where the pages' commands run)."""
    name = study.parse(args)[0]
    load_study(str(REPO / name) if name.endswith((".yaml", ".yml")) else name)


# Each tool's own parser: what its command line would accept or refuse.
PARSERS = {"seqforecast.evaluate": evaluate.parse, "seqforecast.predict": predict.parse,
           "seqforecast.compare": compare.parse, "seqforecast.study": _study}
# The installed commands (pyproject.toml's scripts) and the modules they run.
CONSOLE = {"seqforecast-train": "seqforecast.train", "seqforecast-evaluate": "seqforecast.evaluate",
           "seqforecast-predict": "seqforecast.predict",
           "seqforecast-compare": "seqforecast.compare", "seqforecast-study": "seqforecast.study"}


# ---------------------------------------------------------------- finding commands


def code_lines(text: str) -> list[str]:
    """The lines of a page's code: fenced blocks, blocks indented by 4 spaces, and inline code
    spans; a trailing backslash joins a line to the next."""
    lines, fenced = [], False
    for line in text.splitlines():
        if line.strip().startswith("```"):
            fenced = not fenced
            continue
        if fenced or line.startswith("    "):
            lines.append(line.strip())
        else:
            lines += re.findall(r"`([^`]+)`", line)
    joined, current = [], ""
    for line in lines:
        if line.endswith("\\"):
            current += line[:-1] + " "
            continue
        joined.append(current + line)
        current = ""
    return joined


def commands(tool: str) -> list[tuple[str, str]]:
    """(page, command) for every line of code on every page that runs `tool`, as a module or
    (a command the package installs) by its console script."""
    scripts = [name for name, module in CONSOLE.items() if module == tool]
    found = []
    for page in PAGES:
        for line in code_lines(page.read_text()):
            python = tool in line and re.search(r"(^|\s|/)(python|torchrun)\b", line)
            console = any(re.search(rf"(^|\s){s}(\s|$)", line) for s in scripts)
            if python or console:
                found.append((str(page.relative_to(REPO)), line))
    return found


def split(command: str) -> list[str]:
    """The words of a command, its trailing comment left out."""
    return shlex.split(command, comments=True)


def module_args(command: str) -> tuple[str, list[str]] | None:
    """(module, its arguments) of `python -m <module> ...`, `torchrun ... -m <module> ...` or
    an installed command (`seqforecast-train ...`); None for a synopsis ([group=option ...]), a
    help line, or a command reading a config folder of the reader's own (`--config-dir`:
    extending.md's are trained by the tests below)."""
    words = split(command)
    if "-m" in words:
        i = words.index("-m")
        module, args = words[i + 1], words[i + 2 :]
    else:
        found = [i for i, w in enumerate(words) if w in CONSOLE]
        if not found or words == [words[found[0]]]:  # none, or a command's name in prose
            return None
        module, args = CONSOLE[words[found[0]]], words[found[0] + 1 :]
    if any(a.startswith("[") or a in ("--help", "-h", "--config-dir") for a in args):
        return None
    return module, args


HYDRA_FLAGS_WITH_VALUE = {"--cfg", "-c", "--package", "-p", "--info", "-i"}


def overrides_of(args: list[str]) -> list[str]:
    """The overrides of a training command: Hydra's own flags (and their values) left out."""
    found, skip = [], False
    for a in args:
        if skip:
            skip = False
        elif a in HYDRA_FLAGS_WITH_VALUE:
            skip = a not in ("--info", "-i")  # --info takes its value optionally
        elif not a.startswith("-"):
            found.append(a)
    return found


def sweep_choices(args: list[str]) -> list[list[str]]:
    """A --multirun's overrides as single runs: each swept value once (the others at their
    first value). `key=[a,b]` is a list value, not a sweep."""
    fixed = overrides_of(args)
    swept = {i: a.partition("=")[2].split(",") for i, a in enumerate(fixed)
             if "=" in a and "," in a and not a.partition("=")[2].startswith("[")}
    if not swept:
        return [fixed]
    runs = []
    for i, values in swept.items():
        for value in values:
            run = [f"{a.partition('=')[0]}={swept[j][0]}" if j in swept else a
                   for j, a in enumerate(fixed)]
            run[i] = f"{fixed[i].partition('=')[0]}={value}"
            runs.append(run)
    return runs


# ---------------------------------------------------------------- checks


def runnable(tools: tuple[str, ...]) -> list[tuple[str, str, str, list[str]]]:
    """(page, command, module, arguments) of every command that runs one of `tools` (a
    synopsis or a help line is not a command to check)."""
    found = []
    for tool in tools:
        for page, command in commands(tool):
            parsed = module_args(command)
            if parsed is not None:
                found.append((page, command, *parsed))
    return found


TRAIN = runnable(("seqforecast.train",))


def test_the_pages_hold_training_commands():
    assert len(TRAIN) > 20
    assert any("README.md" == page for page, *_ in TRAIN)


@pytest.mark.parametrize("page,command,module,args", TRAIN,
                         ids=[f"{p}:{c[:60]}" for p, c, *_ in TRAIN])
def test_every_training_command_composes_and_validates(page, command, module, args):
    assert module == "seqforecast.train", command
    for overrides in sweep_choices(args):
        validate_config(composed(tuple(overrides)))


TOOLS = runnable(tuple(PARSERS))


def test_console_script_lines_are_checked_too():
    """`seqforecast-train ...` is composed like `python -m seqforecast.train ...`."""
    assert any(not re.search(r"\bpython\b", command) for _, command, *_ in TRAIN)
    assert module_args("cd x && seqforecast-train experiment=quick") == (
        "seqforecast.train", ["experiment=quick"])
    assert module_args("seqforecast-train --config-dir mine experiment=tiny") is None


def test_the_pages_hold_evaluate_predict_and_compare_commands():
    modules = {module for _, _, module, _ in TOOLS}
    assert modules == set(PARSERS)


@pytest.mark.parametrize("page,command,module,args", TOOLS,
                         ids=[f"{p}:{c[:60]}" for p, c, *_ in TOOLS])
def test_every_evaluate_predict_and_compare_command_parses(page, command, module, args):
    PARSERS[module](args)


DATA = [(str(page.relative_to(REPO)), line) for page in PAGES
        for line in code_lines(page.read_text()) if line.startswith("seqforecast-data ")]


@pytest.mark.parametrize("page,command", DATA, ids=[f"{p}:{c}" for p, c in DATA])
def test_every_seqforecast_data_command_parses(page, command):
    data_cli.parse(split(command)[1:])  # a name no entry has is one line (DatasetError)


SCRIPTS = commands("scripts/")


@cache
def script_help(name: str) -> str:
    """`scripts/<name> --help`: in this process where the script has a main(argv)."""
    fresh = "def main(argv" not in (REPO / "scripts" / name).read_text()
    return run_script(name, "--help", cwd=REPO, fresh=fresh)


@pytest.mark.parametrize("page,command", SCRIPTS, ids=[f"{p}:{c[:60]}" for p, c in SCRIPTS])
def test_every_script_command_names_a_script_and_its_options(page, command):
    words = split(command)
    script = next(w for w in words if w.startswith("scripts/"))
    name = Path(script).name
    assert (REPO / "scripts" / name).is_file(), f"{page}: no {script}"
    options = [w.split("=")[0] for w in words if w.startswith("--")]
    if not options:
        return
    text = script_help(name)
    for option in options:
        assert re.search(rf"(^|[\s\[,]){re.escape(option)}\b", text), f"{page}: {name} {option}"


# ---------------------------------------------------------------- links


def slug(heading: str) -> str:
    """GitHub's anchor for a heading: lower case, punctuation dropped, spaces to hyphens."""
    text = re.sub(r"[`*_]", "", heading.strip().lower())
    text = re.sub(r"[^\w\- ]", "", text)
    return text.replace(" ", "-")


def anchors(page: Path) -> set[str]:
    text, fenced, found = page.read_text(), False, set()
    for line in text.splitlines():
        if line.startswith("```"):
            fenced = not fenced
        elif not fenced and line.startswith("#"):
            found.add(slug(line.lstrip("#")))
    return found


LINKS = [
    (page, target)
    for page in PAGES
    for target in re.findall(r"\]\(([^)\s]+)\)", page.read_text())
    if not re.match(r"[a-z]+://", target)
]


@pytest.mark.parametrize(
    "page,target", LINKS, ids=[f"{p.relative_to(REPO)}->{t}" for p, t in LINKS]
)
def test_every_link_between_pages_leads_somewhere(page, target):
    path, _, anchor = target.partition("#")
    goal = (page.parent / path).resolve() if path else page
    assert goal.exists(), f"{page.relative_to(REPO)}: {target} does not exist"
    if anchor:
        assert goal.suffix == ".md", target
        assert anchor in anchors(goal), f"{page.relative_to(REPO)}: no heading #{anchor}"


def test_the_readme_is_a_short_front_door():
    text = (REPO / "README.md").read_text()
    assert len(text.splitlines()) <= 300
    first_screen = "\n".join(text.splitlines()[:60])
    for step in ("make train", "outputs/", "tensorboard"):
        assert step in first_screen, f"the README's first screen lacks {step!r}"


# ---------------------------------------------------------------- benchmark tables

def test_the_long_horizon_page_is_its_reports():
    """Every table on docs/benchmarks/longhorizon.md is a report as its tool prints it: the
    long-horizon study's rows beside their reference rows and across cells
    (benchmarks/longhorizon.json), the official checkpoints beside them
    (benchmarks/longhorizon_official.json) and the epoch beside the official code; the patience
    table of patchtst.md is benchmarks/patchtst_patience.json; each .md beside its report is
    that print, so a run that changes a number fails here until the page says it."""
    from seqforecast.studies.report import markdown

    printed = markdown(json.loads((REPO / "benchmarks" / "longhorizon.json").read_text()))
    assert (REPO / "benchmarks" / "longhorizon.md").read_text() == printed
    across, beside = printed.split("## Beside the reference rows", 1)
    bench = load_script("bench_longhorizon.py")
    official = bench.official_markdown(
        json.loads((REPO / "benchmarks" / "longhorizon_official.json").read_text())["entries"],
        bench.study_rows(REPO / "benchmarks" / "longhorizon.json"))
    assert (REPO / "benchmarks" / "longhorizon_official.md").read_text() == official
    speed = bench.speed_markdown(
        json.loads((REPO / "benchmarks" / "patchtst_speed.json").read_text())["speed"])
    page = (REPO / "docs" / "benchmarks" / "longhorizon.md").read_text()
    assert _table_rows(page) == [row for text in (beside, across, official, speed)
                                 for row in _table_rows(text)]
    patience = bench.patience_markdown(
        json.loads((REPO / "benchmarks" / "patchtst_patience.json").read_text())["entries"])
    assert (REPO / "benchmarks" / "patchtst_patience.md").read_text() == patience
    assert patience in (REPO / "docs" / "patchtst.md").read_text()


def _table_rows(markdown: str) -> list[str]:
    return [line for line in markdown.splitlines() if line.startswith("|")]


def test_the_speed_tables_are_their_reports():
    """The epoch beside the official code (patchtst.md, longhorizon.md) is
    benchmarks/patchtst_speed.json as bench_longhorizon.py prints it, and the kernels' table
    (patchtst.md) is benchmarks/cpu_kernels.json as bench_cpu_kernels.py prints it, so a new
    measurement fails here until the pages say it too."""
    speed = json.loads((REPO / "benchmarks" / "patchtst_speed.json").read_text())["speed"]
    epoch_rows = _table_rows(load_script("bench_longhorizon.py").speed_markdown(speed))
    kernels = load_script("bench_cpu_kernels.py")
    report = json.loads((REPO / "benchmarks" / "cpu_kernels.json").read_text())
    kernel_rows = _table_rows(kernels.table(report["seconds"]))
    patchtst = (REPO / "docs" / "patchtst.md").read_text()
    longhorizon = (REPO / "docs" / "benchmarks" / "longhorizon.md").read_text()
    for rows, page in ((epoch_rows, patchtst), (epoch_rows, longhorizon),
                       (kernel_rows, patchtst)):
        assert "\n".join(rows) in page


def test_the_literature_speed_tables_are_their_reports():
    """speed.md's tables of the literature's backends are benchmarks/attention_literature*.json
    as bench_attention.py prints them."""
    bench = load_script("bench_attention.py")
    page = (REPO / "docs" / "benchmarks" / "speed.md").read_text()
    for name in ("attention_literature", "attention_literature_patchtst",
                 "attention_literature_itransformer"):
        report = json.loads((REPO / "benchmarks" / f"{name}.json").read_text())
        lengths = sorted({r["length"] for r in report["results"]})
        assert "\n".join(_table_rows(bench.format_table(report["results"], lengths))) in page


def test_the_attention_study_page_is_its_reports():
    """The tables on docs/benchmarks/attention_study.md are benchmarks/attention_field.json's
    (the verdict at the top), then attention_study.json's, attention_study_variate.json's,
    attention_controls.json's, attention_controls_variate.json's and
    attention_controls_gated.json's, as `python -m seqforecast.study` prints them, and each
    report's .md beside it too."""
    from seqforecast.studies.report import markdown

    printed = {name: markdown(json.loads((REPO / "benchmarks" / f"{name}.json").read_text()))
               for name in ("attention_field", "attention_study", "attention_study_variate",
                            "attention_controls", "attention_controls_variate",
                            "attention_controls_gated")}
    page = (REPO / "docs" / "benchmarks" / "attention_study.md").read_text()
    assert _table_rows(page) == [row for text in printed.values() for row in _table_rows(text)]
    for name, text in printed.items():
        assert (REPO / "benchmarks" / f"{name}.md").read_text() == text


def test_the_leaderboard_page_is_its_report():
    """Every table on docs/benchmarks/leaderboard.md is a report as its tool prints it: the
    leaderboard studies' rows beside their reference rows (benchmarks/leaderboard.json,
    leaderboard_epf.json), then the official code beside them and the epoch's speed
    (benchmarks/leaderboard_official.json as bench_leaderboard.py prints it), and each .md beside
    its report is that print, so a run that changes a number fails here until the page says it."""
    from seqforecast.studies.report import markdown

    printed = {}
    for name in ("leaderboard", "leaderboard_epf"):
        printed[name] = markdown(json.loads((REPO / "benchmarks" / f"{name}.json").read_text()))
        assert (REPO / "benchmarks" / f"{name}.md").read_text() == printed[name]
    sections = [text.split("## Beside the reference rows", 1)[1].split("\n\nNot in the table")[0]
                for text in printed.values()]
    bench = load_script("bench_leaderboard.py")
    official = bench.markdown(json.loads((REPO / "benchmarks" / "leaderboard_official.json")
                                         .read_text()), bench.study_rows(list(bench.STUDIES)))
    assert (REPO / "benchmarks" / "leaderboard_official.md").read_text() == official
    page = (REPO / "docs" / "benchmarks" / "leaderboard.md").read_text()
    assert _table_rows(page) == [row for text in (*sections, official)
                                 for row in _table_rows(text)]


def test_the_real_data_tables_are_rows_of_their_report():
    """realdata.md's tables of the three series are benchmarks/realdata.json's rows as
    bench_realdata.py prints them (the report is a full run and a rerun merged; the page
    leaves out the variants built on the earlier fit), and its .md beside it is that print."""
    report = json.loads((REPO / "benchmarks" / "realdata.json").read_text())
    bench = load_script("bench_realdata.py")
    printed = bench.markdown(report, bench.datasets_in(report))
    assert (REPO / "benchmarks" / "realdata.md").read_text() == printed
    page = (REPO / "docs" / "benchmarks" / "realdata.md").read_text()
    tables = page[page.index("**co2** ("):page.index("**Where the model wins")]
    rows = _table_rows(tables)
    assert len(rows) == 3 * 2 + 45 and set(rows) <= set(_table_rows(printed))


@pytest.mark.parametrize("name", ["neuralforecast", "neuralforecast_patchtst_constant",
                                  "neuralforecast_epf", "neuralforecast_epf_calendar"])
def test_the_neuralforecast_page_is_its_reports(name):
    """docs/benchmarks/neuralforecast.md's tables are bench_neuralforecast.py's print of
    benchmarks/<name>.json (ETTh1-96; PatchTST with a constant rate; the EPF markets; NP's
    iTransformer without calendar tokens), whose summary is its cases' (recomputed here), and
    the .md beside each report is the script's page of it."""
    report = json.loads((REPO / "benchmarks" / f"{name}.json").read_text())
    bench = load_script("bench_neuralforecast.py")
    assert json.dumps(bench.summarise(report["cases"])) == json.dumps(report["summary"])
    assert (REPO / "benchmarks" / f"{name}.md").read_text() == bench.markdown(report)
    assert bench.table(report) in (REPO / "docs" / "benchmarks" / "neuralforecast.md").read_text()


# Each report under benchmarks/ a page names, as a path from the repository's root (in its code
# or inline code): one report per table, so a name that is gone is a table's report merged away.
REPORTS = sorted({(str(page.relative_to(REPO)), name) for page in PAGES
                  for line in code_lines(page.read_text())
                  for name in re.findall(r"(?<![\w/.])benchmarks/[\w./-]+\.(?:json|md|csv|png)\b",
                                         line)})


def test_the_pages_name_reports():
    assert len(REPORTS) > 20


@pytest.mark.parametrize("page,name", REPORTS, ids=[f"{p}:{n}" for p, n in REPORTS])
def test_every_report_a_page_names_is_there(page, name):
    assert (REPO / name).is_file(), f"{page}: no {name}"


# ---------------------------------------------------------------- extending.md


def _fenced(page: Path, language: str) -> list[str]:
    return re.findall(rf"```{language}\n(.*?)```", page.read_text(), re.DOTALL)


def _plugin(tmp_path: Path, module: str, yaml: str, group: str, entry_points: str, name: str):
    """A package of one's own shipping `module` under an entry point of `entry_points`, and its
    YAML in a config folder (`my_configs/<group>/<name>.yaml`) for --config-dir."""
    (tmp_path / f"{name}_plugin.py").write_text(module)
    info = tmp_path / f"seqforecast_{name}-0.dist-info"
    info.mkdir()
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: seqforecast-{name}\n"
                                   f"Version: 0\n")
    (info / "entry_points.txt").write_text(f"[{entry_points}]\n{name} = {name}_plugin\n")
    (tmp_path / "my_configs" / group).mkdir(parents=True)
    (tmp_path / "my_configs" / group / f"{name}.yaml").write_text(yaml)
    env = dict(os.environ, PYTHONPATH=f"{REPO}{os.pathsep}{tmp_path}")
    env.pop("HYDRA_FULL_ERROR", None)
    return env


def _train(tmp_path, env, *commands: tuple[list[str], str]):
    """Each (overrides, run dir) as `python -m seqforecast.train --config-dir my_configs
    <overrides> epochs=1 hydra.run.dir=<run dir>` from `tmp_path`, in one interpreter of the
    plugin's own (its entry point read there, not in this process, whose registries it would
    join): their exit codes and streams."""
    return run_fresh([["--config-dir", "my_configs", *overrides, "epochs=1",
                       f"hydra.run.dir={run_dir}"] for overrides, run_dir in commands],
                     tmp_path, env=env)


@pytest.mark.slow
def test_the_backend_in_extending_md_registers_and_trains_as_a_plugin(tmp_path):
    """extending.md's backend module and YAML, as a package of one's own would ship them (an
    entry point, a --config-dir): the backend composes, trains for an epoch, and refuses a bad
    value, residual attention and positions inside attention in one line, and takes the root's
    attention_dropout."""
    page = REPO / "docs" / "extending.md"
    module, yaml = _fenced(page, "python")[0], _fenced(page, "yaml")[0]
    assert len(module.strip().splitlines()) <= 50
    env = _plugin(tmp_path, module, yaml, "attention", "seqforecast.attention", "cosine")
    cosine = ["experiment=quick", "attention=cosine"]
    done, bad, residual, rope, shown = _train(
        tmp_path, env, ([*cosine, "attention.temperature=5", "log.figures=false"], "run"),
        ([*cosine, "attention.temperature=-1"], "bad"),
        (["model=encoder", "attention=cosine", "model.res_attention=true"], "residual"),
        ([*cosine, "pos_encoding=rope"], "rope"),
        # its YAML names no dropout: the stored schema reads the root's attention_dropout
        (["--cfg", "job", "--resolve", "--package", "attention", "experiment=itransformer",
          "attention=cosine"], "shown"))
    assert done.returncode == 0, done.stderr[-2000:]
    metrics = json.loads((tmp_path / "run" / "metrics.json").read_text())
    assert metrics["run"]["epochs_run"] == 1 and metrics["test"]["model"]["mse"] > 0
    assert bad.returncode == 2 and bad.stderr.count("\n") == 1
    assert "attention.temperature=-1.0 is not allowed: must be > 0" in bad.stderr
    assert residual.returncode == 2 and residual.stderr.count("\n") == 1
    assert "its scores are cosines" in residual.stderr
    # positions inside attention: refused, not dropped (its constructor takes no position)
    assert rope.returncode == 2 and rope.stderr.count("\n") == 1, rope.stderr[-2000:]
    assert ("pos_encoding=rope conflicts with attention=cosine: cosine attention takes no "
            "position module inside it") in rope.stderr
    assert not (tmp_path / "rope" / "checkpoints").exists()
    assert shown.returncode == 0, shown.stderr[-2000:]
    assert "dropout: 0.1\n" in shown.stdout and "temperature: 10.0" in shown.stdout


@pytest.mark.slow
def test_the_family_in_extending_md_registers_and_trains_as_a_plugin(tmp_path):
    """extending.md's model family, shipped the same way: it composes with any backend, trains
    for an epoch with its own attention maps, and refuses a key it does not have."""
    page = REPO / "docs" / "extending.md"
    module, yaml = _fenced(page, "python")[1], _fenced(page, "yaml")[1]
    assert len(module.strip().splitlines()) <= 50
    env = _plugin(tmp_path, module, yaml, "model", "seqforecast.families", "pooled")
    small = ["model=pooled", "d_model=16", "n_heads=2", "in_len=12", "out_len=6",
             "data.train_size=128", "data.val_size=32", "data.test_size=256"]
    done, bad = _train(tmp_path, env, ([*small, "attention=diff"], "run"),
                       ([*small, "model.label_len=4"], "bad"))
    assert done.returncode == 0, done.stderr[-2000:]
    metrics = json.loads((tmp_path / "run" / "metrics.json").read_text())
    assert metrics["run"]["epochs_run"] == 1 and metrics["test"]["model"]["mse"] > 0
    assert (tmp_path / "run" / "figures" / "final" / "encoder_layer1.png").exists()
    assert bad.returncode == 2 and bad.stderr.count("\n") == 1
    assert "model has no key label_len" in bad.stderr


# ---------------------------------------------------------------- defaults on the pages


def _shown(value) -> str:
    """A default as the pages write it (YAML's words for true, false and null)."""
    if isinstance(value, bool):
        return str(value).lower()
    return "null" if value is None else str(value)


def _page_defaults(text: str) -> list[tuple[str, str]]:
    """(key, default) of every row of the `| key | default | what |` table: keys and defaults
    listed in the same order, a default's note in brackets left out."""
    text = text[text.index("| key | default | what |"):]
    text = text[: text.index("\n\n")]
    pairs = []
    for keys, defaults in re.findall(r"^\| ((?:`[\w.]+`(?:, )?)+) \| ([^|]+) \|", text, re.M):
        names = re.findall(r"`([\w.]+)`", keys)
        values = [v.strip().strip("`").split(" (")[0] for v in defaults.split(", ")]
        assert len(names) == len(values), (keys, defaults)
        pairs += list(zip(names, values, strict=True))
    return pairs


def test_the_defaults_the_pages_list_are_the_schemas():
    """configuration.md's table of keys and attention.md's diff options repeat defaults for
    the reader; the schema is their one home, and this holds the pages to it."""
    config = (REPO / "docs" / "configuration.md").read_text()
    pairs = _page_defaults(config)
    assert len(pairs) > 30
    default = compose_config()
    # where the table names a model=encoder, embedding=patch or data=csv key, that option's default
    option = {"model": compose_config(["model=encoder"]), "data": compose_config(["data=csv"]),
              "embedding": compose_config(["embedding=patch"])}
    for key, shown in pairs:
        group, _, name = key.partition(".")
        cfg = default if name in default[group] and group != "embedding" else option[group]
        if group == "model" and name in ("head_dropout", "res_attention", "attention_init",
                                         "attention_output_dropout", "official_weights"):
            cfg = option["model"]
        expected = _shown(cfg[group][name] if name else cfg[group])
        assert shown == expected, f"{key}: the page says {shown}, the schema {expected}"
    diff = (REPO / "docs" / "attention.md").read_text()
    composed = compose_config(["attention=diff"]).attention
    listed = re.findall(r"^- `(\w+)` \[`?([\w.]+)`?\]", diff, re.M)
    assert len(listed) >= 6
    for key, shown in listed:  # written as Python writes them there: True, None
        assert shown == str(composed[key]), f"{key}: the page says {shown}"


def test_the_published_settings_the_pages_list_are_the_table():
    """itransformer.md and patchtst.md show the authors' per-dataset settings as commands;
    seqforecast/published/ is their one home (the leaderboard and the studies read it), and
    each command of those pages trains the setting it holds for its dataset and horizon."""
    checked = 0
    for page, _command, _module, args in TRAIN:
        given = dict(o.partition("=")[::2] for o in overrides_of(args))
        model = given.get("experiment")
        if page != f"docs/{model}.md" or "dataset" not in given:
            continue
        ours = composed(tuple(overrides_of(args)))
        settings = published_overrides(model, given["dataset"], ours.out_len)
        published = compose_config([f"experiment={model}", f"dataset={given['dataset']}",
                                    f"out_len={ours.out_len}", *settings])
        for key in (o.partition("=")[0] for o in settings):
            shown, expected = OmegaConf.select(ours, key), OmegaConf.select(published, key)
            assert shown == expected, f"{page}: {given['dataset']} {key}={shown}, " \
                                      f"published {expected}"
        checked += len(settings)
    assert checked > 30  # every published dataset's command on the two pages


def test_a_usage_text_prints_its_continued_command_lines_as_written():
    """A module docstring is its CLI's --help: a command continued with a backslash must print
    with the backslash and the line break (a raw docstring), not joined into one line."""
    import ast

    joined = []
    for path in [*sorted((REPO / "seqforecast").rglob("*.py")),
                 *sorted((REPO / "scripts").glob("*.py"))]:
        source = path.read_text()
        tree = ast.parse(source)
        text = ast.get_docstring(tree, clean=False)
        if text is None:
            continue
        written = ast.get_source_segment(source, tree.body[0].value)
        for line in written.splitlines():
            if line.endswith("\\") and not line.endswith("\\\\") and line not in text:
                joined.append(f"{path.relative_to(REPO)}: {line.strip()}")
    assert not joined, joined


# `from seqforecast.x import a, b` in a page, and `seqforecast.x.y(` named in its text
IMPORTED = re.compile(r"^\s*from (seqforecast[\w.]*) import ([\w, ]+)$", re.M)
CALLED = re.compile(r"`(seqforecast(?:\.\w+)+)\(")


@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(REPO)))
def test_every_name_a_page_imports_from_seqforecast_is_there(page):
    import importlib

    text = page.read_text()
    for module, names in IMPORTED.findall(text):
        found = importlib.import_module(module)
        for name in (n.strip() for n in names.split(",")):
            assert hasattr(found, name), f"{page.name}: {module} has no {name}"
    for dotted in CALLED.findall(text):
        module, _, name = dotted.rpartition(".")
        assert hasattr(importlib.import_module(module), name), f"{page.name}: no {dotted}"


def test_the_large_files_table_is_its_report():
    """speed.md's table of Electricity and Traffic is benchmarks/large_files.json as
    bench_large_files.py prints it, and its .md beside it too."""
    report = json.loads((REPO / "benchmarks" / "large_files.json").read_text())
    printed = load_script("bench_large_files.py").markdown(report)
    page = (REPO / "docs" / "benchmarks" / "speed.md").read_text()
    assert "\n".join(_table_rows(printed)) in page
    assert (REPO / "benchmarks" / "large_files.md").read_text() == printed
