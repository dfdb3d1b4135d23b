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

import inspect
import math
import pkgutil
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from functools import lru_cache
from importlib import import_module
from typing import Any, Literal

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

_OWN_RULES = (
    SecretRule(
        'Private Key',
        r'-----BEGIN[ A-Z0-9]{0,30}PRIVATE KEY(?: BLOCK)?-----(?s:.*?)(?:-----END[ A-Z0-9]{0,30}PRIVATE KEY(?: BLOCK)?-----|\z)',
    ),
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


def _options(*, never_capture: bool = False) -> Any:
    import re2  # pyright: ignore[reportMissingTypeStubs]

    options: Any = re2.Options()
    options.log_errors = False
    options.never_capture = never_capture
    options.max_mem = 64 << 20  # room for the joined rules' DFA, so a scan stays on the fast path
    return options


def _compiles(pattern: str) -> bool:
    import re2  # pyright: ignore[reportMissingTypeStubs]

    try:
        re2.compile(pattern.encode(), _options())  # pyright: ignore[reportUnknownMemberType]
    except Exception:  # noqa: BLE001 - re2.error and anything odd the binding raises
        return False
    return True


def _groups(pattern: str) -> int:
    import re2  # pyright: ignore[reportMissingTypeStubs]

    compiled: Any = re2.compile(pattern.encode(), _options())  # pyright: ignore[reportUnknownMemberType]
    return int(compiled.groups)


def default_rules(preset: Preset = 'detect-secrets') -> tuple[SecretRule, ...]:
    """The rules of a preset."""
    if preset == 'none':
        return ()
    return (*_OWN_RULES, *_detect_secrets_rules())


def _entropy(text: bytes) -> float:
    counts = Counter(text)
    total = len(text)
    return -sum(count / total * math.log2(count / total) for count in counts.values())


_TOKEN_BYTES = frozenset(b'ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_+/=.~-')
_TOKEN_START_BYTES = _TOKEN_BYTES - {ord('=')}
"""Bytes a secret extends over: backwards not over `=`, which ends the key of `KEY=value`."""


class Redactor:
    """Finds and masks secrets with a set of rules; built once, used for every return."""

    def __init__(self, rules: Sequence[SecretRule]) -> None:
        import re2  # pyright: ignore[reportMissingTypeStubs]

        self.rules = tuple(rules)
        self._compiled: list[Any] = [
            re2.compile(rule.pattern.encode(), _options())  # pyright: ignore[reportUnknownMemberType]
            for rule in self.rules
        ]
        # Non-capturing alternatives: the joined pattern only says whether any rule matches anywhere.
        parts = [b'(?:' + rule.pattern.encode() + b')' for rule in self.rules]
        self._placeholder: Any = re2.compile(_PLACEHOLDER.encode(), _options())  # pyright: ignore[reportUnknownMemberType]
        self._joined: Any = (
            re2.compile(b'|'.join(parts), _options(never_capture=True)) if parts else None  # pyright: ignore[reportUnknownMemberType]
        )

    @classmethod
    def from_setting(cls, setting: SecretRedaction) -> Redactor:
        """Build from the user's setting; `ValueError` naming a pattern that RE2 cannot compile."""
        rules = list(default_rules(setting.preset))
        for kind, pattern in setting.patterns.items():
            if not isinstance(kind, str) or not kind or not isinstance(pattern, str):  # pyright: ignore[reportUnnecessaryIsInstance]
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
        if self._joined.search(data) is None:
            return text, {}  # the common case: one linear scan, nothing allocated
        # Something matched: run each rule on its own, so one rule's match cannot hide another's (alternation
        # would take the leftmost and skip what overlaps it), and mask the union of what they found.
        spans: list[tuple[int, int, str]] = []
        for rule, compiled in zip(self.rules, self._compiled, strict=True):
            for found in compiled.finditer(data):
                span = self._secret_span(rule, found, data)
                if span is not None:
                    spans.append(span)
        if not spans:
            return text, {}
        out: list[bytes] = []
        counts: Counter[str] = Counter()
        merged: list[list[Any]] = []
        for start, end, kind in sorted(spans, key=lambda span: (span[0], -span[1])):
            if merged and start < merged[-1][1]:
                last = merged[-1]
                if end - start > last[1] - last[0]:
                    last[2] = kind  # overlapping finds: one secret, named by the longest
                last[1] = max(last[1], end)
            else:
                merged.append([start, end, kind])
        cursor = 0
        for start, end, kind in merged:
            out.append(data[cursor:start])
            out.append(marker(kind).encode())
            counts[kind] += 1
            cursor = end
        out.append(data[cursor:])
        return b''.join(out).decode('utf-8', 'surrogatepass'), dict(counts)

    def _secret_span(self, rule: SecretRule, found: Any, data: bytes) -> tuple[int, int, str] | None:
        start, end = found.start(rule.group), found.end(rule.group)
        if start == -1:
            start, end = found.start(), found.end()
        if rule.kind != 'Private Key':
            if not rule.group:
                # A whole match may include the separators around the token: keep them.
                while start < end and data[start] not in _TOKEN_BYTES:
                    start += 1
                while end > start and data[end - 1] not in _TOKEN_BYTES:
                    end -= 1
            # Take the whole token, never a part of it.
            while start > 0 and data[start - 1] in _TOKEN_START_BYTES:
                start -= 1
            while end < len(data) and data[end] in _TOKEN_BYTES:
                end += 1
            while end > start and data[end - 1] == ord('.'):
                end -= 1  # a full stop after the token ends the sentence, not the secret
        secret = data[start:end]
        if not secret or self._placeholder.search(secret) is not None:
            return None
        if rule.min_entropy and _entropy(secret) < rule.min_entropy:
            return None
        return start, end, rule.kind
