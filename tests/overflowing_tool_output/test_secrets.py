"""`redact_secrets`: credentials are withheld from everything the capability shows the model."""

from __future__ import annotations

import json
import re
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from pydantic_ai import Agent
from pydantic_ai.exceptions import UserError
from pydantic_ai.messages import (
    ModelMessage,
    ModelRequest,
    ModelResponse,
    TextPart,
    ToolCallPart,
    ToolReturn,
    ToolReturnPart,
    UserPromptPart,
)
from pydantic_ai.models.function import AgentInfo, FunctionModel

from examples import _payloads as payloads
from examples._secret_corpus import corpus, encoded_shapes
from pydantic_ai_harness.overflowing_tool_output import (
    Band,
    LocalFileStore,
    OverflowingToolOutput,
    SecretRedaction,
    Spill,
    Summarize,
    Truncate,
    TruncationStrategy,
)
from pydantic_ai_harness.overflowing_tool_output._redaction._secrets import Redactor, default_rules, marker
from pydantic_ai_harness.overflowing_tool_output._rendering._render import render_value, stored_form

pytestmark = pytest.mark.anyio

GITHUB = 'ghp_' + 'aB3dE5fG7hJ9kL1mN2pQ4rS6tU8vW0xY2zA4'
AWS = 'AKIAQWERTYUIOPASDFGH'
KEY_BLOCK = (
    '-----BEGIN RSA PRIVATE KEY-----\n'
    + '\n'.join(['MIIEowIBAAKCAQEA7h3X9v' * 3] * 20)
    + '\n-----END RSA PRIVATE KEY-----'
)


@pytest.fixture(scope='module')
def redactor() -> Redactor:
    return Redactor.from_setting(SecretRedaction())


def leaked(secret: str, text: str) -> bool:
    """Whether any 8 characters of `secret` in a row are still readable in `text`."""
    return any(secret[i : i + 8] in text for i in range(max(1, len(secret) - 7)))


# --- the rules -------------------------------------------------------------------------------------------


def test_recall_on_planted_secrets_is_at_least_95_percent(redactor: Redactor) -> None:
    planted = corpus()
    missed = [p.category for p in planted if leaked(p.secret, redactor.mask(p.text)[0])]
    categories = {p.category.split(':')[0].split(' (')[0] for p in planted}
    assert len(planted) == 140 and len(categories) >= 12
    assert 1 - len(missed) / len(planted) >= 0.95, missed


def test_no_false_positive_on_the_economy_payloads(redactor: Redactor) -> None:
    texts = {
        'test log': payloads.test_log(20_000),
        'orders': payloads.orders_json(3_000),
        'csv': payloads.csv_export(20_000),
        'source': payloads.source_file(),
        'find': payloads.find_listing(),
        'ci': payloads.ansi_ci_output(),
        **{f'page {page}': payloads.catalog_page(page) for page in range(1, 11)},
    }
    for name, value in texts.items():
        rendered = render_value(value)
        for text in (rendered.text, stored_form(rendered)[0]):
            masked, counts = redactor.mask(text)
            assert counts == {}, name
            assert masked is text


def test_the_marker_names_the_kind_never_the_value_nor_a_hash(redactor: Redactor) -> None:
    masked, counts = redactor.mask(f'token={GITHUB} and aws {AWS}.')
    assert masked == 'token=[secret withheld: GitHub Token] and aws [secret withheld: AWS Access Key].'
    assert counts == {'GitHub Token': 1, 'AWS Access Key': 1}


def test_a_private_key_block_is_withheld_whole_even_when_cut_off(redactor: Redactor) -> None:
    masked, _ = redactor.mask(f'before\n{KEY_BLOCK}\nafter')
    assert masked == 'before\n[secret withheld: Private Key]\nafter'
    cut = KEY_BLOCK[: len(KEY_BLOCK) // 2]  # a truncated `cat id_rsa`: no END line
    assert redactor.mask(f'$ cat id_rsa\n{cut}')[0] == '$ cat id_rsa\n[secret withheld: Private Key]'


def test_placeholders_and_low_entropy_values_are_left_alone(redactor: Redactor) -> None:
    for text in [
        'password: ${DB_PASSWORD}',
        'api_key = <your key here>',
        'SECRET_KEY=changeme',
        'password: ********',
        'max_tokens: 200000',
        'token_count = 1234567',
        'Authorization: Bearer aaaaaaaaaaaaaaaaaaaa',
    ]:
        assert redactor.mask(text) == (text, {}), text


def test_user_patterns_add_kinds_and_bad_ones_are_refused_at_construction() -> None:
    redactor = Redactor.from_setting(SecretRedaction(preset='none', patterns={'Ticket Key': r'ticket=(TKT-\w{8})'}))
    assert redactor.mask('GET /x?ticket=TKT-ab12cd34 ' + GITHUB) == (
        'GET /x?ticket=[secret withheld: Ticket Key] ' + GITHUB,
        {'Ticket Key': 1},
    )
    with pytest.raises(ValueError, match=r"redact_secrets.patterns\['bad'\] is not a valid RE2 pattern"):
        OverflowingToolOutput(redact_secrets=SecretRedaction(patterns={'bad': r'(?<=x)y'}))
    with pytest.raises(ValueError, match='may not contain brackets'):
        OverflowingToolOutput(redact_secrets=SecretRedaction(patterns={'a]b': 'x'}))
    with pytest.raises(TypeError, match='redact_secrets must be a SecretRedaction'):
        OverflowingToolOutput(redact_secrets={'preset': 'none'})  # pyright: ignore[reportArgumentType]
    with pytest.raises(TypeError, match='keep_original_in must be an OverflowStore'):
        OverflowingToolOutput(redact_secrets=SecretRedaction(keep_original_in='/tmp/originals'))


def test_the_preset_is_detect_secrets_plus_our_own_rules() -> None:
    kinds = Counter(rule.kind for rule in default_rules())
    assert {'AWS Access Key', 'GitHub Token', 'GitLab Token', 'Slack Token', 'JSON Web Token', 'Private Key'} <= set(
        kinds
    )
    assert {'Password in URL', 'Secret Keyword', 'Anthropic API Key', 'Google API Key'} <= set(kinds)
    assert default_rules('none') == ()


def test_hostile_text_is_scanned_in_linear_time(redactor: Redactor) -> None:
    # Many near-misses of many rules at once: RE2 scans it linearly (a backtracking engine would not).
    text = ('AKIA' + 'password=' + 'sk-' + 'eyJ' + '://a:' + '-----BEGIN ') * 20_000 + 'x' * 100_000
    masked, _ = redactor.mask(text)
    assert len(masked) > 0
    fake = 'a [secret withheld: GitHub Token] already'
    assert redactor.mask(fake) == (fake, {})


def test_recall_on_escaped_and_encoded_secrets(redactor: Redactor) -> None:
    planted = encoded_shapes()
    missed = [p.category for p in planted if leaked(p.secret, redactor.mask(p.text)[0])]
    assert missed == []
    everything = [*corpus(), *planted]
    missed = [p.category for p in everything if leaked(p.secret, redactor.mask(p.text)[0])]
    assert 1 - len(missed) / len(everything) >= 0.95, missed


def test_a_json_string_holding_json_keeps_its_syntax_when_masked(redactor: Redactor) -> None:
    text = json.dumps({'settings': json.dumps({'password': 'Qw8Er7Ty6Ui5Op4'})})
    masked, counts = redactor.mask(text)
    assert counts == {'Secret Keyword': 1}
    assert json.loads(json.loads(masked)['settings']) == {'password': '[secret withheld: Secret Keyword]'}
    slashes = '{"dsn":"postgres:\\/\\/app:Qw8Er7Ty6Ui5Op4@db\\/app"}'
    masked, _ = redactor.mask(slashes)
    assert json.loads(masked) == {'dsn': 'postgres://app:[secret withheld: Password in URL]@db/app'}


def test_a_secret_split_across_parts_is_masked_where_it_starts(redactor: Redactor) -> None:
    head, tail = GITHUB[:10], GITHUB[10:]
    parts = ['using token ' + head, tail + ' to push', 'done']
    masked, counts = redactor.mask_parts(parts)
    assert masked == ['using token [secret withheld: GitHub Token]', ' to push', 'done']
    assert counts == {'GitHub Token': 1}
    clean = ['plain', 'text']
    same, none = redactor.mask_parts(clean)
    assert none == {} and all(a is b for a, b in zip(same, clean, strict=True))


def test_masked_parts_read_as_the_masked_whole_wherever_the_text_is_cut(redactor: Redactor) -> None:
    text = f'héllo ✓ token {GITHUB} then\n{KEY_BLOCK[:300]}'
    whole, counts = redactor.mask(text)
    assert counts == {'GitHub Token': 1, 'Private Key': 1}
    for first in range(0, len(text), 7):
        for second in range(first, len(text), 53):
            parts = [text[:first], text[first:second], text[second:]]
            masked, found = redactor.mask_parts(parts)
            assert ''.join(masked) == whole, (first, second)
            assert found == counts
            assert len(masked) == 3


def test_bytes_are_masked_as_utf8(redactor: Redactor) -> None:
    data = f'HOME=/root\nGITHUB_TOKEN={GITHUB}\n'.encode()
    assert redactor.mask_bytes(data) == (
        b'HOME=/root\nGITHUB_TOKEN=[secret withheld: GitHub Token]\n',
        {'GitHub Token': 1},
    )
    plain = b'nothing here\n'
    assert redactor.mask_bytes(plain)[0] is plain


async def test_a_structured_return_holding_json_strings_is_masked_in_a_run(tmp_path: Path) -> None:
    password = 'Qw8Er7Ty6Ui5Op4'
    value = {
        'settings': json.dumps({'db': {'password': password}}),
        'dsn': 'postgres:\\/\\/app:' + password + '@db\\/app',
    }
    model, seen = scripted([ToolCallPart('config', {})])
    agent = Agent(
        model,
        capabilities=[OverflowingToolOutput(redact_secrets=SecretRedaction(), store=LocalFileStore(base_dir=tmp_path))],
    )
    agent.tool_plain(name='config')(lambda: value)
    await agent.run('go')
    visible = shown(seen[-1])
    assert not leaked(password, visible)
    assert '[secret withheld: Secret Keyword]' in visible


# --- in agent runs -----------------------------------------------------------------------------------------


def scripted(*steps: list[ToolCallPart]) -> tuple[FunctionModel, list[list[ModelMessage]]]:
    """A model that makes the given calls, one step per request, and records what it was sent."""
    seen: list[list[ModelMessage]] = []

    def respond(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        seen.append(list(messages))
        step = len(seen) - 1
        if step < len(steps):
            return ModelResponse(parts=steps[step])
        return ModelResponse(parts=[TextPart('done')])

    return FunctionModel(respond), seen


def shown(messages: list[ModelMessage]) -> str:
    """Everything the model was sent as tool returns."""
    return '\n'.join(
        part.model_response_str()
        for message in messages
        if isinstance(message, ModelRequest)
        for part in message.parts
        if isinstance(part, ToolReturnPart)
    )


def handle_in(text: str) -> str:
    found = re.search(r"handle '([^']+)'", text)
    assert found is not None, text
    return found.group(1)


async def test_a_small_return_below_every_band_is_masked(tmp_path: Path) -> None:
    model, seen = scripted([ToolCallPart('env', {})])
    agent = Agent(
        model,
        capabilities=[OverflowingToolOutput(redact_secrets=SecretRedaction(), store=LocalFileStore(base_dir=tmp_path))],
    )

    @agent.tool_plain
    def env() -> str:
        return f'HOME=/root\nGITHUB_TOKEN={GITHUB}\nPATH=/usr/bin\n'

    result = await agent.run('go')
    assert shown(seen[-1]) == 'HOME=/root\nGITHUB_TOKEN=[secret withheld: GitHub Token]\nPATH=/usr/bin\n'
    [part] = [p for m in result.all_messages() for p in m.parts if isinstance(p, ToolReturnPart)]
    assert part.metadata == {'secrets_withheld': {'GitHub Token': 1}}
    assert not leaked(GITHUB, json.dumps(result.all_messages_json().decode()))
    assert list(tmp_path.rglob('*')) == []  # nothing was stored


async def test_a_return_without_secrets_is_the_very_same_object(tmp_path: Path) -> None:
    capability = OverflowingToolOutput(redact_secrets=SecretRedaction(), store=LocalFileStore(base_dir=tmp_path))
    text = 'plain output\n' * 100
    model, _ = scripted([ToolCallPart('plain', {})])
    agent = Agent(model, capabilities=[capability])
    returned: list[Any] = []

    @agent.tool_plain
    def plain() -> str:
        returned.append(text)
        return text

    result = await agent.run('go')
    [part] = [p for m in result.all_messages() for p in m.parts if isinstance(p, ToolReturnPart)]
    assert part.content is returned[0]
    assert part.metadata is None


async def test_a_spill_masks_preview_store_and_every_query_tool(tmp_path: Path) -> None:
    lines = [f'2024-05-01 12:00:{i % 60:02d} INFO request {i} ok' for i in range(30_000)]
    lines[3] = f'DEBUG using token {GITHUB}'  # in the preview's head
    lines[15_000] = f'DEBUG aws key {AWS} loaded'  # only reachable through the query tools
    log = '\n'.join(lines)
    store = LocalFileStore(base_dir=tmp_path)
    capability = OverflowingToolOutput(redact_secrets=SecretRedaction(), store=store)
    answers: list[str] = []

    def respond(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        if len(messages) == 1:
            return ModelResponse(parts=[ToolCallPart('logs', {})])
        text = shown(messages[-1:])
        answers.append(text)
        if len(answers) == 1:
            handle = handle_in(text)
            return ModelResponse(
                parts=[
                    ToolCallPart('grep_tool_result', {'handle': handle, 'pattern': 'DEBUG'}, tool_call_id='g'),
                    ToolCallPart(
                        'read_tool_result', {'handle': handle, 'offset': 14_995, 'limit': 10}, tool_call_id='r'
                    ),
                    ToolCallPart('grep_tool_result', {'handle': handle, 'pattern': 'AKIA'}, tool_call_id='a'),
                ]
            )
        return ModelResponse(parts=[TextPart('done')])

    agent = Agent(FunctionModel(respond), capabilities=[capability])
    agent.tool_plain(name='logs')(lambda: log)
    await agent.run('go')
    preview, queries = answers
    assert '[secret withheld: GitHub Token]' in preview
    assert 'DEBUG aws key [secret withheld: AWS Access Key] loaded' in queries
    assert "No line matches 'AKIA'" in queries
    for text in (
        preview,
        queries,
        *(p.read_text() for p in tmp_path.rglob('*') if p.is_file() and 'idx' not in p.name),
    ):
        assert not leaked(GITHUB, text) and not leaked(AWS, text)


async def test_a_structured_return_is_masked_and_queried_masked(tmp_path: Path) -> None:
    users = [{'id': i, 'name': f'user{i}', 'api_key': 'k' * 3} for i in range(2_000)]
    users[700]['api_key'] = 'sk_live_' + 'Zx9Qw8Er7Ty6Ui5Op4As3Df2'
    small = {'service': 'billing', 'db': {'url': 'postgres://app:S3cr3t-Passw0rd@db:5432/billing'}}
    answers: list[str] = []

    def respond(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        if len(messages) == 1:
            return ModelResponse(
                parts=[ToolCallPart('users', {}, tool_call_id='u'), ToolCallPart('config', {}, tool_call_id='c')]
            )
        text = shown(messages[-1:])
        answers.append(text)
        if len(answers) == 1:
            handle = handle_in(text)
            return ModelResponse(parts=[ToolCallPart('read_tool_result', {'handle': handle, 'path': '$[700]'})])
        return ModelResponse(parts=[TextPart('done')])

    agent = Agent(
        FunctionModel(respond),
        capabilities=[OverflowingToolOutput(redact_secrets=SecretRedaction(), store=LocalFileStore(base_dir=tmp_path))],
    )
    agent.tool_plain(name='users')(lambda: users)
    agent.tool_plain(name='config')(lambda: small)
    await agent.run('go')
    first, query = answers
    assert (
        '{"service":"billing","db":{"url":"postgres://app:[secret withheld: Password in URL]@db:5432/billing"}}'
        in first
    )
    assert (
        query.endswith(
            '$[700] = {"id":700,"name":"user700","api_key":"[secret withheld: Stripe Access Key]"}\n'
            + query.split('\n')[-1]
        )
        or '[secret withheld: Stripe Access Key]' in query
    )
    assert not leaked('Zx9Qw8Er7Ty6Ui5Op4As3Df2', '\n'.join(answers))
    assert not leaked('S3cr3t-Passw0rd', '\n'.join(answers))


async def test_a_secret_across_the_truncation_cut_is_not_half_shown(tmp_path: Path) -> None:
    for cut_at in range(1_990, 2_010, 3):  # the secret straddles the kept head's end at every offset
        text = 'x' * cut_at + f' {GITHUB} ' + 'y' * 50_000
        model, seen = scripted([ToolCallPart('big', {})])
        capability = OverflowingToolOutput(
            bands=[Band(over=1_000, action=Truncate(max_chars=4_000, strategy=TruncationStrategy.head))],
            redact_secrets=SecretRedaction(),
        )
        agent = Agent(model, capabilities=[capability])
        agent.tool_plain(name='big')(lambda text=text: text)
        await agent.run('go')
        visible = shown(seen[-1])
        assert not leaked(GITHUB, visible)
        assert 'ghp_' not in visible


async def test_text_sent_to_a_summarizer_is_masked() -> None:
    received: list[str] = []

    def summarizer(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        received.append(shown(messages) + str(messages))
        return ModelResponse(parts=[TextPart('A deploy log; it used a GitHub token (withheld).')])

    model, _ = scripted([ToolCallPart('deploy', {})])
    action = Summarize(model=FunctionModel(summarizer), keep_original=False)
    capability = OverflowingToolOutput(bands=[Band(over=1_000, action=action)], redact_secrets=SecretRedaction())
    agent = Agent(model, capabilities=[capability])
    agent.tool_plain(name='deploy')(lambda: f'step 1 ok\nusing {GITHUB}\n' + 'step ok\n' * 500)
    await agent.run('go')
    assert received and all(not leaked(GITHUB, text) for text in received)
    assert '[secret withheld: GitHub Token]' in received[0]


async def test_the_original_goes_to_the_operators_store_only(tmp_path: Path) -> None:
    originals = LocalFileStore(base_dir=tmp_path / 'originals')
    spill = LocalFileStore(base_dir=tmp_path / 'spill')
    capability = OverflowingToolOutput(redact_secrets=SecretRedaction(keep_original_in=originals), store=spill)
    body = f'AWS_ACCESS_KEY_ID={AWS}\n' + 'padding line\n' * 2_000
    model, seen = scripted([ToolCallPart('env', {})])
    agent = Agent(model, capabilities=[capability])
    agent.tool_plain(name='env')(lambda: body)
    result = await agent.run('go')
    [part] = [p for m in result.all_messages() for p in m.parts if isinstance(p, ToolReturnPart)]
    assert isinstance(part.metadata, dict)
    original_handle = part.metadata['secrets_original_handle']
    assert part.metadata['secrets_withheld'] == {'AWS Access Key': 1}
    assert await originals.read(original_handle) == body.encode()
    assert part.metadata['overflow_handle'] != original_handle
    assert AWS.encode() not in await spill.read(part.metadata['overflow_handle'])
    assert not leaked(AWS, shown(seen[-1]))


async def test_a_secret_split_across_two_content_parts_is_found(tmp_path: Path) -> None:
    head, tail = KEY_BLOCK[:200], KEY_BLOCK[200:]
    model, seen = scripted([ToolCallPart('keys', {})])
    agent = Agent(
        model,
        capabilities=[OverflowingToolOutput(redact_secrets=SecretRedaction(), store=LocalFileStore(base_dir=tmp_path))],
    )
    agent.tool_plain(name='keys')(
        lambda: ToolReturn(return_value='see content', content=[head, tail], metadata={'app': 1})
    )
    result = await agent.run('go')
    texts = [
        str(p.content) for m in result.all_messages() for p in m.parts if isinstance(p, ToolReturnPart | UserPromptPart)
    ]
    assert not any(leaked(KEY_BLOCK.split('\n')[3], text) for text in texts)
    assert any(marker('Private Key') in text for text in texts)
    [part] = [p for m in result.all_messages() for p in m.parts if isinstance(p, ToolReturnPart)]
    assert part.metadata == {'app': 1, 'secrets_withheld': {'Private Key': 1}}
    del seen


async def test_a_missing_detect_secrets_is_a_configuration_error(monkeypatch: pytest.MonkeyPatch) -> None:
    import sys

    from pydantic_ai_harness.overflowing_tool_output._redaction import _secrets

    _secrets._detect_secrets_rules.cache_clear()
    monkeypatch.setitem(sys.modules, 'detect_secrets.plugins', None)
    try:
        with pytest.raises(UserError, match=r"redact_secrets: .*pip install 'pydantic-ai-harness-context\[secrets\]'"):
            OverflowingToolOutput(redact_secrets=SecretRedaction())
        assert OverflowingToolOutput(redact_secrets=SecretRedaction(preset='none', patterns={'x': 'abc'}))
    finally:
        monkeypatch.undo()
        _secrets._detect_secrets_rules.cache_clear()


async def test_spill_then_truncate_keeps_masking_even_when_the_store_fails() -> None:
    class Failing:
        async def write(self, key: str, data: bytes) -> str:
            raise OSError('disk full')

        async def read(self, handle: str) -> bytes:
            raise KeyError(handle)

    model, seen = scripted([ToolCallPart('big', {})])
    capability = OverflowingToolOutput(
        bands=[Band(over=1_000, action=Spill(then=Truncate()))], store=Failing(), redact_secrets=SecretRedaction()
    )
    agent = Agent(model, capabilities=[capability])
    agent.tool_plain(name='big')(lambda: f'{GITHUB}\n' * 3 + 'z' * 30_000 + f'\n{GITHUB}')
    with pytest.warns(Warning):
        await agent.run('go')
    assert not leaked(GITHUB, shown(seen[-1]))


@pytest.mark.parametrize('redaction', [True, False])
def test_a_result_holding_files_the_capability_failed_on_is_withheld_with_redaction_on(redaction: bool) -> None:
    """The capability never ends a run: what it failed on goes on as it is, its text already masked. Bytes no mask
    has read (a PDF whose durable read failed) are withheld instead when redaction is on: it fails closed."""
    import warnings

    from pydantic_ai.messages import BinaryContent, ToolReturn

    from pydantic_ai_harness.overflowing_tool_output import MemoryStore
    from pydantic_ai_harness.overflowing_tool_output._redaction._withhold import build_withholding, left_after_failure

    withholding = build_withholding(SecretRedaction(), query_store=MemoryStore()) if redaction else None
    pdf = BinaryContent(b'%PDF-1.4 token ghp_' + b'a' * 36, media_type='application/pdf')
    with warnings.catch_warnings(record=True):
        warnings.simplefilter('always')
        for result in (pdf, [pdf, 'caption'], ToolReturn('done', content=[pdf])):
            left = left_after_failure(withholding, 'report', result, TimeoutError())
            if redaction:
                assert isinstance(left, ToolReturn) and left.return_value == (
                    '[The output of `report` is withheld: checking it for secrets failed (TimeoutError).]'
                )
            else:
                assert left is result
        assert left_after_failure(withholding, 'report', 'plain text, masked already', TimeoutError()) == (
            'plain text, masked already'
        )
