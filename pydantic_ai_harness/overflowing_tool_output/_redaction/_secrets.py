"""Mask credentials in text before the model sees it: rules from `detect-secrets`, matched in one RE2 pass.

The rule set is the regex plugins of Yelp's `detect-secrets` (AWS, Azure, GitHub, GitLab, Slack, Stripe, JWT,
private keys, passwords in URLs, ...), read from the installed package so it stays theirs and current, and
its keyword list for `KEY=value` assignments. RE2 cannot run the few patterns written with lookaround; those
are skipped, or rewritten where the lookaround only marks the token's end. A handful of rules of ours cover
what it lacks (whole private key blocks, current OpenAI and Anthropic keys, Google API keys, GitHub
fine-grained tokens, bearer tokens). All rules are joined into one RE2 alternation, so text without a secret
costs one linear scan.

A secret is replaced by a marker naming its kind, `[secret withheld: GitHub Token]`: never the value, nor a
hash of it (a hash would let anyone test guesses). Pure logic; the capability decides where it applies.
"""

from __future__ import annotations

import base64
import inspect
import pkgutil
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from functools import lru_cache
from importlib import import_module
from typing import Any, Literal

from ._secret_spans import CHECKED_HEAD, TokenRuns, entropy, merge_spans, unescaped_views

__all__ = ('Redactor', 'SecretRedaction', 'SecretRule', 'default_rules', 'marker')

Preset = Literal['detect-secrets', 'none']


@dataclass(frozen=True)
class SecretRule:
    """One kind of secret and how to find it."""

    kind: str
    """What the marker calls it, e.g. `'GitHub Token'`."""

    pattern: str
    """An RE2 pattern."""

    group: int = 0
    """The capture group holding the secret; 0 for the whole match."""

    min_entropy: float = 0.0
    """Shannon entropy (bits per character) the secret must reach, to pass over words and placeholders."""


@dataclass(frozen=True)
class SecretRedaction:
    """Opt-in masking of credentials in what `OverflowingToolOutput` shows the model.

    ```python
    from pydantic_ai_harness.overflowing_tool_output import OverflowingToolOutput, SecretRedaction

    capability = OverflowingToolOutput(redact_secrets=SecretRedaction(patterns={'Ticket Key': 'TKT-[0-9A-F]{16}'}))
    ```
    """

    preset: Preset = 'detect-secrets'
    """The built-in rules: `'detect-secrets'` (needs the `secrets` extra: `detect-secrets`), or `'none'`."""

    patterns: Mapping[str, str] = field(default_factory=dict[str, str])
    """More rules, kind -> RE2 pattern; the first capture group is the secret if there is one, else the match."""

    keep_original_in: Any = None
    """An `OverflowStore` that receives the original of every return that had a secret, for the operator; the
    model's store and query tools only ever hold the masked form. Its handle is in the return's metadata
    (`secrets_original_handle`). Default: the original is not kept."""


def marker(kind: str) -> str:
    """What replaces a secret of `kind`."""
    return f'[secret withheld: {kind}]'


_SKIPPED_PLUGINS = frozenset({'Base64HighEntropyString', 'HexHighEntropyString', 'IPPublicDetector'})
"""Entropy detectors flag ordinary hashes and ids; a public IP address is not a credential."""

_GROUP_ONE_PLUGINS = frozenset({'AWSKeyDetector', 'BasicAuthDetector', 'CloudantDetector', 'SoftlayerDetector'})
"""Plugins whose first capture group is the secret itself (the rest of the match is its context)."""


def _base64_key_heads() -> str:
    """The base64 of a private key block's first line, as a Kubernetes secret's `tls.key` holds it."""
    heads: list[str] = []
    for label in ('', 'RSA ', 'EC ', 'DSA ', 'OPENSSH ', 'ENCRYPTED ', 'PGP '):
        line = f'-----BEGIN {label}PRIVATE KEY-----'.encode()
        heads.append(base64.b64encode(line[: len(line) // 3 * 3]).decode())
    return '|'.join(heads)


_OWN_RULES = (
    SecretRule(
        'Private Key',
        r'-----BEGIN[ A-Z0-9]{0,30}PRIVATE KEY(?: BLOCK)?-----(?s:.*?)(?:-----END[ A-Z0-9]{0,30}PRIVATE KEY(?: BLOCK)?-----|\z)',
    ),
    SecretRule('Private Key', rf'(?:{_base64_key_heads()})[A-Za-z0-9+/=]*'),
    SecretRule('OpenAI Token', r'\bsk-(?:proj|svcacct|admin)-[A-Za-z0-9_-]{40,}', min_entropy=3.5),
    SecretRule('Anthropic API Key', r'\bsk-ant-(?:api|admin|oat)\d\d-[A-Za-z0-9_-]{40,}', min_entropy=3.5),
    SecretRule('Google API Key', r'\bAIza[0-9A-Za-z_-]{35}\b'),
    SecretRule('GitHub Token', r'\bgithub_pat_[0-9A-Za-z_]{50,}'),
    SecretRule('Bearer Token', r'(?i)\bbearer[ \t]+([A-Za-z0-9._~+/-]{16,}=*)', group=1, min_entropy=3.0),
    # detect-secrets' URL rule leaves out passwords with sub-delimiters (`!$&'()*+,;=`), which URLs allow.
    SecretRule('Password in URL', r'(?i)\b[a-z][a-z0-9+.-]{1,20}://[^\s:/@]{0,100}:([^\s/@]{1,200})@', group=1),
)

_PLACEHOLDER = (
    r'^(?:[0-9.]+|\$\{?[A-Za-z_][A-Za-z0-9_]*\}?|\{\{[^}]*\}\}|<[^>]*>|\*+|x+|X+|\.+|'
    r'(?i:true|false|null|none|changeme|redacted|example|placeholder))$'
)


_OWN_KEYWORDS = ('token', 'credentials?', 'access_?key')
"""Credential names `detect-secrets`' keyword list lacks (`AUTH_TOKEN=...`, `credentials: ...`)."""


def _keyword_rules(words: Sequence[str]) -> tuple[SecretRule, ...]:
    """`KEY=value`, `key: value`, `"key": "value"` with a key named like a credential: quoted, or bare."""
    key = r'(?i)\b[\w.-]{0,40}(?:' + '|'.join(words) + r')[\w.-]{0,40}["\']?[ \t]*(?::=|=>|=|:)[ \t]*'
    return (
        SecretRule('Secret Keyword', key + r'["\'`]([^"\'`\s]{6,200})["\'`]', group=1, min_entropy=2.5),
        SecretRule('Secret Keyword', key + r'([^\s"\'`,;(){}\[\]<>]{6,200})(?:[\s,;]|$)', group=1, min_entropy=2.5),
    )


@lru_cache(maxsize=1)
def _detect_secrets_rules() -> tuple[SecretRule, ...]:
    try:
        plugins = import_module('detect_secrets.plugins')
        base = import_module('detect_secrets.plugins.base')
        keyword = import_module('detect_secrets.plugins.keyword')
    except ImportError as exc:
        raise ImportError(
            "SecretRedaction(preset='detect-secrets') needs the `detect-secrets` package: "
            "pip install 'pydantic-ai-harness-context[secrets]'"
        ) from exc
    rules: list[SecretRule] = []
    for info in pkgutil.iter_modules(plugins.__path__):
        module = import_module(f'detect_secrets.plugins.{info.name}')
        for name, found in inspect.getmembers(module, inspect.isclass):
            cls: Any = found
            if (
                cls.__module__ != module.__name__
                or not issubclass(cls, base.RegexBasedDetector)
                or inspect.isabstract(cls)
            ):
                continue
            if name in _SKIPPED_PLUGINS:
                continue
            for compiled in cls().denylist:
                pattern = _to_re2(compiled.pattern, compiled.flags)
                if pattern is not None:
                    group = 1 if _groups(pattern) and name in _GROUP_ONE_PLUGINS else 0
                    rules.append(SecretRule(str(cls.secret_type), pattern, group))
    words = [word for word in keyword.DENYLIST if word.isascii()]
    rules.extend(_keyword_rules([*words, *_OWN_KEYWORDS]))
    return tuple(rules)


def _to_re2(pattern: str, flags: int) -> str | None:
    """A detect-secrets pattern in RE2 syntax, or `None` when RE2 cannot express it."""
    if flags & 64 and any(char.isspace() for char in pattern):
        return None  # re.VERBOSE: only patterns without whitespace read the same without it
    # A trailing `(?!\w)` only says the token ends there; greedy classes already run to its end.
    pattern = pattern.removesuffix(r'(?!\w)')
    pattern = pattern.replace('{50,1024}', '{50,1000}')  # RE2 caps counted repetition at 1,000
    if flags & 2:
        pattern = '(?i)' + pattern
    return pattern if _compiles(pattern) else None


def _re2() -> Any:
    """The RE2 binding (`google-re2`, which ships no type stubs)."""
    return import_module('re2')


def _options(*, never_capture: bool = False) -> Any:
    options: Any = _re2().Options()
    options.log_errors = False
    options.never_capture = never_capture
    options.max_mem = 64 << 20  # room for the joined rules' DFA, so a scan stays on the fast path
    return options


def _compiles(pattern: str) -> bool:
    try:
        _re2().compile(pattern.encode(), _options())
    except Exception:  # noqa: BLE001 - re2.error and anything odd the binding raises
        return False
    return True


def _groups(pattern: str) -> int:
    compiled: Any = _re2().compile(pattern.encode(), _options())
    return int(compiled.groups)


def default_rules(preset: Preset = 'detect-secrets') -> tuple[SecretRule, ...]:
    """The rules of a preset."""
    if preset == 'none':
        return ()
    return (*_OWN_RULES, *_detect_secrets_rules())


_TOKEN_BYTES = frozenset(b'ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_+/=.~-')


class Redactor:
    """Finds and masks secrets with a set of rules; built once, used for every return."""

    def __init__(self, rules: Sequence[SecretRule]) -> None:
        re2 = _re2()
        self.rules = tuple(rules)
        # A rule whose secret is its whole match needs no capture: RE2 then finds the span with its DFA alone.
        self._compiled: list[Any] = [
            re2.compile(rule.pattern.encode(), _options(never_capture=not rule.group)) for rule in self.rules
        ]
        # Non-capturing alternatives: the joined pattern only says whether any rule matches anywhere.
        parts = [b'(?:' + rule.pattern.encode() + b')' for rule in self.rules]
        self._placeholder: Any = re2.compile(_PLACEHOLDER.encode(), _options())
        self._joined: Any = re2.compile(b'|'.join(parts), _options(never_capture=True)) if parts else None

    @classmethod
    def from_setting(cls, setting: SecretRedaction) -> Redactor:
        """Build from the user's setting; `ValueError` naming a pattern that RE2 cannot compile."""
        rules = list(default_rules(setting.preset))
        given: list[tuple[object, object]] = list(setting.patterns.items())  # what was passed, checked here
        for kind, pattern in given:
            if not isinstance(kind, str) or not kind or not isinstance(pattern, str):
                raise ValueError('redact_secrets.patterns must map a non-empty kind name to an RE2 pattern string')
            if any(char in kind for char in '[]\n'):
                raise ValueError(f'redact_secrets.patterns: the kind {kind!r} may not contain brackets or newlines')
            if not _compiles(pattern):
                raise ValueError(f'redact_secrets.patterns[{kind!r}] is not a valid RE2 pattern: {pattern!r}')
            rules.append(SecretRule(kind, pattern, 1 if _groups(pattern) else 0))
        return cls(rules)

    def mask(self, text: str) -> tuple[str, dict[str, int]]:
        """`text` with every secret replaced by its marker, and how many of each kind were withheld."""
        if self._joined is None or not text:
            return text, {}
        data = text.encode('utf-8', 'surrogatepass')
        if b'\\' not in data and self._joined.search(data) is None:
            return text, {}  # the common case: one linear scan, nothing allocated
        masked, counts = self.mask_bytes(data)
        if not counts:
            return text, {}
        return masked.decode('utf-8', 'surrogatepass'), counts

    def mask_bytes(self, data: bytes) -> tuple[bytes, dict[str, int]]:
        """`mask` for UTF-8 bytes: `data` itself when it holds no secret."""
        spans = self._spans(data)
        if not spans:
            return data, {}
        out: list[bytes] = []
        counts: Counter[str] = Counter()
        cursor = 0
        for start, end, kind in spans:
            out.append(data[cursor:start])
            out.append(marker(kind).encode())
            counts[kind] += 1
            cursor = end
        out.append(data[cursor:])
        return b''.join(out), dict(counts)

    def mask_parts(self, parts: Sequence[str]) -> tuple[list[str], dict[str, int]]:
        """Texts read one after the other, masked as if joined without a separator, so a secret split across two
        parts is found; a marker goes where its secret starts, and the rest of the secret is cut from the parts
        after. The parts themselves (the same list's items) when none holds a secret.
        """
        encoded = [part.encode('utf-8', 'surrogatepass') for part in parts]
        spans = self._spans(b''.join(encoded))
        if not spans:
            return list(parts), {}
        counts: Counter[str] = Counter(kind for _, _, kind in spans)
        masked: list[str] = []
        offset = 0
        for part, data in zip(parts, encoded, strict=True):
            end_of_part = offset + len(data)
            inside = [span for span in spans if span[0] < end_of_part and span[1] > offset]
            if not inside:
                masked.append(part)
            else:
                out: list[bytes] = []
                cursor = offset
                for start, end, kind in inside:
                    out.append(data[cursor - offset : max(cursor, start) - offset])
                    if start >= offset:
                        out.append(marker(kind).encode())
                    cursor = min(end, end_of_part)
                out.append(data[cursor - offset :])
                masked.append(b''.join(out).decode('utf-8', 'surrogatepass'))
            offset = end_of_part
        return masked, dict(counts)

    def _spans(self, data: bytes) -> list[tuple[int, int, str]]:
        """Where the secrets in `data` are, merged and sorted: found in `data` and in its unescaped views."""
        if self._joined is None or not data:
            return []
        spans: list[tuple[int, int, str]] = []
        if self._joined.search(data) is not None:
            spans.extend(self._view_spans(data))
        if b'\\' in data:
            for view in unescaped_views(data):
                if self._joined.search(view.data) is not None:
                    for start, end, kind in self._view_spans(view.data):
                        spans.append((view.source_offset(start), view.source_offset(end), kind))
        return merge_spans(spans)

    def _view_spans(self, data: bytes) -> list[tuple[int, int, str]]:
        """Every rule's finds in `data`, each widened to its whole token.

        Each rule runs on its own, so one rule's match cannot hide another's (alternation would take the leftmost
        and skip what overlaps it): one linear scan per rule.
        """
        spans: list[tuple[int, int, str]] = []
        found_spans: list[tuple[int, int, int]] = []
        for index, (rule, compiled) in enumerate(zip(self.rules, self._compiled, strict=True)):
            for found in compiled.finditer(data):
                start, end = found.start(rule.group), found.end(rule.group)
                if start == -1:
                    start, end = found.start(), found.end()
                if rule.kind == 'Private Key':
                    if end > start:
                        spans.append((start, end, rule.kind))  # the block as matched: it is not one token
                    continue
                if not rule.group:
                    # A whole match may include the separators around the token: keep them.
                    while start < end and data[start] not in _TOKEN_BYTES:
                        start += 1
                    while end > start and data[end - 1] not in _TOKEN_BYTES:
                        end -= 1
                found_spans.append((start, end, index))
        if not found_spans:
            return spans
        # Take the whole token, never a part of it: the run ends of every find, in one sweep.
        runs = TokenRuns(data)
        starts = runs.run_starts(start for start, _, _ in found_spans)
        ends = runs.run_ends(end for _, end, _ in found_spans)
        checked: dict[tuple[int, int, float], bool] = {}
        for start, end, index in found_spans:
            rule = self.rules[index]
            wide_start = starts[start]
            wide_end = runs.without_full_stops(wide_start, ends[end])
            key = (wide_start, wide_end, rule.min_entropy)
            kept = checked.get(key)
            if kept is None:
                kept = checked[key] = self._is_secret(data, wide_start, wide_end, rule.min_entropy)
            if kept:
                spans.append((wide_start, wide_end, rule.kind))
        return spans

    def _is_secret(self, data: bytes, start: int, end: int, min_entropy: float) -> bool:
        """Not empty, not a placeholder, and random enough; a long span is judged by its head."""
        if start >= end:
            return False
        head = data[start : min(end, start + CHECKED_HEAD)]
        if end - start <= CHECKED_HEAD and self._placeholder.search(head) is not None:
            return False
        return not min_entropy or entropy(head) >= min_entropy
