from __future__ import annotations

import dataclasses
import math
import warnings
from typing import Any

import anyio
import pytest
from dirty_equals import IsInt, IsStr
from hypothesis import given, settings, strategies as st
from inline_snapshot import snapshot
from pydantic import BaseModel
from pydantic_ai import Agent, ModelRetry, RunContext
from pydantic_ai.messages import BinaryContent, ImageUrl, ToolReturn
from pydantic_ai.tools import ToolDefinition

from pydantic_ai_harness.overflowing_tool_output import (
    Band,
    OverflowingToolOutput,
    OverflowingToolOutputWarning,
    Passthrough,
    Spill,
    Summarize,
    Truncate,
    TruncationStrategy,
)

from .conftest import FailingStore, MemoryStore, run_tool

pytestmark = pytest.mark.anyio


def cap(*bands: Band, **kwargs: Any) -> OverflowingToolOutput[Any]:
    return OverflowingToolOutput(bands=list(bands), **kwargs)


# --- band selection --------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ('size', 'expected'),
    [(99, 'passthrough'), (100, 'truncate-small'), (999, 'truncate-small'), (1_000, 'truncate-large')],
)
async def test_largest_reached_threshold_wins_inclusively(size: int, expected: str) -> None:
    capability = cap(
        Band(over=1_000, action=Truncate(max_chars=300)),
        Band(over=100, action=Truncate(max_chars=800, strategy=TruncationStrategy.head)),
    )
    text = 'x' * size
    run = await run_tool(capability, text)
    out = run.returned()
    if expected == 'passthrough':
        assert out == text
    elif expected == 'truncate-small':
        assert len(out) == min(size, 800) or len(out) <= 800
        assert out == text if size <= 800 else 'the last' in out
    else:
        assert len(out) <= 300
        assert 'the middle' in out


async def test_value_below_threshold_is_the_very_same_object() -> None:
    value = {'rows': list(range(10))}
    seen: list[Any] = []

    capability = cap(Band(over=10_000, action=Truncate()))
    run = await run_tool(capability, lambda: seen.append(value) or value)
    assert run.returned() is value


async def test_envelope_is_the_same_object_when_nothing_changes() -> None:
    envelope = ToolReturn(return_value='small', content='also small', metadata={'k': 1})
    capability = cap(Band(over=10_000, action=Truncate()))
    hook_result = await capability.after_tool_execute(
        _ctx(), call=_call(), tool_def=ToolDefinition(name='big'), args={}, result=envelope
    )
    assert hook_result is envelope


@settings(max_examples=300, deadline=None)
@given(
    text=st.text(alphabet=st.sampled_from('ab \n\x1b[31m\x9b'), max_size=120),
    threshold=st.integers(min_value=0, max_value=80),
    over_tokens=st.booleans(),
    strip_ansi=st.booleans(),
    per_tool_empty=st.booleans(),
)
def test_plain_string_shortcut_agrees_with_the_full_path(
    text: str, threshold: int, over_tokens: bool, strip_ansi: bool, per_tool_empty: bool
) -> None:
    """A plain `str` return skips rendering when it is plainly below the threshold; a `ToolReturn` never does.

    Both must come out the same, and an untouched string must be the very same object.
    """
    capability = cap(
        Band(over=threshold, action=Truncate(max_chars=200, then=None)),
        over_tokens=over_tokens,
        strip_ansi=strip_ansi,
        per_tool={'big': []} if per_tool_empty else {},
    )

    async def both() -> tuple[Any, Any]:
        plain = await capability.after_tool_execute(
            _ctx(), call=_call(), tool_def=ToolDefinition(name='big'), args={}, result=text
        )
        enveloped = await capability.after_tool_execute(
            _ctx(), call=_call(), tool_def=ToolDefinition(name='big'), args={}, result=ToolReturn(return_value=text)
        )
        return plain, enveloped

    plain, enveloped = anyio.run(both)
    if isinstance(plain, ToolReturn):  # reduced: the value comes back in an envelope carrying the notes
        assert (plain.return_value, plain.metadata) == (enveloped.return_value, enveloped.metadata)
    else:
        assert plain == enveloped.return_value
        if plain == text:
            assert plain is text


def test_negative_threshold_is_rejected() -> None:
    with pytest.raises(ValueError, match='Band.over must not be negative, got -1'):
        Band(over=-1, action=Truncate())


def test_duplicate_thresholds_are_rejected() -> None:
    with pytest.raises(ValueError, match=r'bands\[1\] repeats the threshold over=500 of bands\[0\]'):
        cap(Band(over=500, action=Truncate()), Band(over=500, action=Spill()))


def test_duplicate_thresholds_in_per_tool_name_the_tool() -> None:
    with pytest.raises(ValueError, match=r"per_tool\['logs'\]\[1\] repeats"):
        OverflowingToolOutput(per_tool={'logs': [Band(over=1, action=Truncate()), Band(over=1, action=Truncate())]})


@pytest.mark.parametrize(
    ('make', 'message'),
    [
        (lambda: Truncate(max_chars=10), 'Truncate.max_chars must be at least 200'),
        (lambda: Truncate(max_chars='10'), 'Truncate.max_chars must be an int'),  # type: ignore[arg-type]
        (lambda: Truncate(strategy='middle'), "Truncate.strategy must be one of 'head', 'tail', 'head_tail'"),  # type: ignore[arg-type]
        (lambda: Band(over=1.5, action=Truncate()), 'Band.over must be an int'),  # type: ignore[arg-type]
        (lambda: Band(over=1, action='truncate'), 'Band.action must be'),  # type: ignore[arg-type]
        (lambda: Spill(then='truncate'), 'Spill.then must be an action'),  # type: ignore[arg-type]
        (lambda: Spill(preview_chars=5), 'Spill.preview_chars must be at least'),
        (lambda: OverflowingToolOutput(bands=[Truncate()]), r'bands\[0\] must be a Band'),  # type: ignore[list-item]
        (lambda: OverflowingToolOutput(tokenizer=5), 'tokenizer must be a callable'),  # type: ignore[arg-type]
    ],
)
def test_bad_configuration_is_rejected_at_construction(make: Any, message: str) -> None:
    with pytest.raises((ValueError, TypeError), match=message):
        make()


def test_strategy_accepts_its_string_value() -> None:
    assert Truncate(strategy='tail').strategy is TruncationStrategy.tail  # type: ignore[arg-type]


def test_actions_are_immutable_and_chain_to_any_depth() -> None:
    chain = Summarize(then=Spill(then=Truncate(then=Passthrough())))
    with pytest.raises(dataclasses.FrozenInstanceError):
        chain.then = None  # type: ignore[misc]
    depth, action = 0, chain
    while action is not None:
        depth += 1
        action = getattr(action, 'then', None)
    assert depth == 4


def test_default_bands() -> None:
    assert OverflowingToolOutput().bands == [Band(over=10_000, action=Spill(then=Truncate()))]
    assert OverflowingToolOutput().id == 'overflowing_tool_output'


# --- summary_prompt ----------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ('template', 'message'),
    [
        ('Summarize {output}', r'missing: \{tool_name\}'),
        ('Summarize {tool_name}', r'missing: \{output\}'),
        ('{tool_name} {output} {extra}', r'unknown: \{extra\}'),
        ('{tool_name} {output} {0}', r'unknown: \{0\}'),
        ('{tool_name} {output', 'not a valid format template'),
    ],
)
def test_summary_prompt_is_validated_at_construction(template: str, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        OverflowingToolOutput(summary_prompt=template)


def test_summary_prompt_allows_escaped_braces() -> None:
    OverflowingToolOutput(summary_prompt='Tool {tool_name} said: {output}. Reply as {{"summary": ...}}')


# --- per_tool and tool_filter ------------------------------------------------------------------------------


async def test_per_tool_replaces_global_bands() -> None:
    capability = OverflowingToolOutput(
        bands=[Band(over=10, action=Truncate(max_chars=200))],
        per_tool={'big': [Band(over=10, action=Truncate(max_chars=400, strategy=TruncationStrategy.tail))]},
    )
    run = await run_tool(capability, 'y' * 5_000)
    assert len(run.returned()) <= 400
    assert run.returned().startswith('[truncated: the first')


async def test_per_tool_empty_list_means_never_reduce() -> None:
    capability = OverflowingToolOutput(bands=[Band(over=10, action=Truncate())], per_tool={'big': []})
    text = 'z' * 50_000
    run = await run_tool(capability, text)
    assert run.returned() == text


def other() -> str:
    return ''


async def _async_only_big(ctx: RunContext[Any], tool_def: ToolDefinition) -> bool:
    return tool_def.name == 'big'


@pytest.mark.parametrize(
    ('tool_filter', 'reduced'),
    [
        ('all', True),
        (['big'], True),
        (['other'], False),
        ({'tier': 1}, True),
        ({'tier': 2}, False),
        (lambda ctx, td: td.name == 'big', True),
        (lambda ctx, td: False, False),
        (_async_only_big, True),
    ],
)
async def test_tool_filter_selects_tools(tool_filter: Any, reduced: bool) -> None:
    capability = cap(Band(over=10, action=Truncate()), tool_filter=tool_filter)
    text = 'q' * 20_000
    # `other` exists, so naming it is no mistake (a name no tool has is warned about: test_configuration.py).
    run = await run_tool(capability, text, metadata={'tier': 1}, extra_tools=[other])
    assert (run.returned() != text) is reduced


# --- measuring ----------------------------------------------------------------------------------------------


async def test_over_tokens_uses_the_heuristic_by_default() -> None:
    capability = cap(Band(over=1_000, action=Truncate(max_chars=500)), over_tokens=True)
    assert (await run_tool(capability, 'a' * 3_996)).returned() == 'a' * 3_996  # 999 tokens
    assert len((await run_tool(capability, 'a' * 3_997)).returned()) <= 500  # ceil(3,997 / 4) = 1,000 tokens


async def test_over_tokens_with_a_tokenizer() -> None:
    def words(text: str) -> int:
        return len(text.split())

    capability = cap(Band(over=100, action=Truncate(max_chars=300)), over_tokens=True, tokenizer=words)
    assert len((await run_tool(capability, 'w ' * 100)).returned()) <= 300
    assert (await run_tool(capability, 'w' * 10_000)).returned() == 'w' * 10_000  # one "token"


async def test_a_raising_tokenizer_falls_back_to_the_heuristic_with_a_warning() -> None:
    def broken(text: str) -> int:
        raise RuntimeError('tokenizer exploded')

    capability = cap(Band(over=100, action=Truncate(max_chars=300)), over_tokens=True, tokenizer=broken)
    with pytest.warns(OverflowingToolOutputWarning, match='tokenizer raised'):
        run = await run_tool(capability, 'a' * 1_000)
    assert len(run.returned()) <= 300


ANSI_SAMPLES = [
    '\x1b[31mred\x1b[0m',
    '\x1b[1;38;5;208mbold orange\x1b[m',
    '\x1b[?25lhidden cursor\x1b[?25h',
    '\x1b[2J\x1b[Hclear',
    '\x1b]8;;https://example.com\x07link\x1b]8;;\x07',
    '\x1b]0;title\x1b\\after title',
    '\x1b(Bcharset',
    '\x1b=keypad\x1b>',
    '\x1bPdevice control\x1b\\dcs',
    '\x9b31mc1 csi',
]


@pytest.mark.parametrize('sample', ANSI_SAMPLES)
async def test_strip_ansi_removes_every_escape_sequence(sample: str) -> None:
    capability = cap(Band(over=10_000, action=Truncate()), strip_ansi=True)
    run = await run_tool(capability, sample)
    out = run.returned()
    assert '\x1b' not in out and '\x9b' not in out
    assert out == snapshot_by_sample[sample]


snapshot_by_sample = dict(
    zip(
        ANSI_SAMPLES,
        [
            'red',
            'bold orange',
            'hidden cursor',
            'clear',
            'link',
            'after title',
            'charset',
            'keypad',
            'dcs',
            'c1 csi',
        ],
    )
)


async def test_strip_ansi_happens_before_measuring() -> None:
    coloured = '\x1b[32m' + 'ok ' + '\x1b[0m'
    capability = cap(Band(over=1_000, action=Truncate(max_chars=300)), strip_ansi=True)
    run = await run_tool(capability, coloured * 100)  # 1,100 raw chars, 300 visible
    assert run.returned() == 'ok ' * 100


# --- truncation through an agent run -------------------------------------------------------------------------


@pytest.mark.parametrize(
    'action', [Spill(), Spill(preview_chars=4_000), Truncate(max_chars=5_000)], ids=['spill', 'big-preview', 'truncate']
)
async def test_an_action_that_would_not_shrink_the_output_leaves_it_as_is(action: Spill | Truncate) -> None:
    """A return just over a low threshold is smaller than any spill preview: it is kept, with nothing stored."""
    store = MemoryStore()
    text = 'line\n' * 80  # 400 characters
    run = await run_tool(cap(Band(over=300, action=action), store=store), text)
    assert run.returned() == text
    assert run.returns()[0].metadata is None
    assert store.data == {}


async def test_truncate_marker_says_what_was_omitted() -> None:
    text = ''.join(f'{i}: log line\n' for i in range(1, 2_001))
    run = await run_tool(cap(Band(over=1_000, action=Truncate(max_chars=400))), text)
    assert run.returned() == snapshot("""\
[truncated: the middle 28680 of 28893 characters (lines 10-1993) omitted and not kept]
1: log line
2: log line
3: log line
4: log line
5: log line
6: log line
7: log line
8: log line
9: log line
[lines 10-1993 omitted here]
1994: log line
1995: log line
1996: log line
1997: log line
1998: log line
1999: log line
2000: log line
""")


async def test_structured_values_are_rendered_once_and_truncated_as_text() -> None:
    class Row(BaseModel):
        id: int
        name: str

    rows = [Row(id=i, name=f'row {i}') for i in range(500)]
    run = await run_tool(cap(Band(over=1_000, action=Truncate(max_chars=500))), rows)
    out = run.returned()
    assert out.startswith('[{"id":0,"name":"row 0"}')
    assert len(out) <= 500


# --- ToolReturn envelope ------------------------------------------------------------------------------------


async def test_content_is_reduced_with_the_same_bands_and_metadata_is_kept() -> None:
    envelope = ToolReturn(return_value='small', content='c' * 5_000, metadata={'source': 'db'})
    run = await run_tool(cap(Band(over=1_000, action=Truncate(max_chars=300))), envelope)
    part = run.returns()[0]
    assert part.content == 'small'
    assert part.metadata == {
        'source': 'db',
        'overflow_content_action': 'truncate',
        'overflow_content_size_before': 5_000,
        'overflow_content_size_after': IsInt(le=300),
    }
    [content] = run.user_texts()
    assert len(content) <= 300


async def test_non_mapping_metadata_is_kept_untouched() -> None:
    marker = object()
    envelope = ToolReturn(return_value='v' * 5_000, metadata=marker)
    run = await run_tool(cap(Band(over=1_000, action=Truncate(max_chars=300))), envelope)
    assert run.returns()[0].metadata is marker
    assert len(run.returned()) <= 300


async def test_text_list_content_is_reduced_as_one_text() -> None:
    envelope = ToolReturn(return_value='ok', content=['a' * 3_000, 'b' * 3_000])
    run = await run_tool(cap(Band(over=1_000, action=Truncate(max_chars=400))), envelope)
    [content] = run.user_texts()
    notice, kept = content.split('\n', 1)
    assert notice.startswith('[truncated: the middle') and kept.startswith('aaa') and content.endswith('bbb')
    assert len(content) <= 400


async def test_multimodal_content_that_overflows_is_left_with_a_warning() -> None:
    content = ['t' * 5_000, ImageUrl('https://example.com/cat.png')]
    envelope = ToolReturn(return_value='ok', content=content)
    with pytest.warns(OverflowingToolOutputWarning, match='holds files'):
        run = await run_tool(cap(Band(over=1_000, action=Truncate())), envelope)
    [user] = run.user_texts()
    assert user == content


# --- binary ---------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    'value',
    [
        b'\x89PNG\r\n\x1a\n' + bytes(5_000),
        bytearray(5_000),
        memoryview(bytes(5_000)),
        BinaryContent(data=b'%PDF-1.7' + bytes(5_000), media_type='application/pdf'),
    ],
)
async def test_binary_is_never_truncated(value: Any) -> None:
    with pytest.warns(OverflowingToolOutputWarning, match='binary data cannot be truncated; leaving it as is'):
        run = await run_tool(cap(Band(over=1_000, action=Truncate())), value)
    if isinstance(value, memoryview):
        assert run.returned() == bytes(value)  # pydantic cannot serialize a memoryview itself
    else:
        assert run.returned() is value


async def test_truncate_on_binary_follows_then(memory_store: MemoryStore) -> None:
    data = b'\x89PNG\r\n\x1a\n' + bytes(5_000)
    capability = cap(Band(over=1_000, action=Truncate(then=Spill())), store=memory_store)
    with pytest.warns(OverflowingToolOutputWarning, match='binary data cannot be truncated; falling back to Spill'):
        run = await run_tool(capability, data)
    [(key, stored)] = memory_store.data.items()
    assert key == IsStr(regex=r'.+/call_0/0')
    assert stored == data
    assert 'PNG image, image/png' in run.returned()


# --- values that cannot be serialized ------------------------------------------------------------------------


class Opaque:
    pass


def _cyclic() -> dict[str, Any]:
    d: dict[str, Any] = {'name': 'loop'}
    d['self'] = d
    return d


def _deep(levels: int) -> list[Any]:
    root: list[Any] = []
    cur = root
    for _ in range(levels):
        nxt: list[Any] = []
        cur.append(nxt)
        cur = nxt
    return root


@pytest.mark.parametrize(
    'value',
    [
        Opaque(),
        {'o': Opaque()},
        {1, 2, 3},
        {'nan': math.nan, 'inf': math.inf},
        {'raw': b'\xff\xfe\x00'},
        _cyclic(),
        _deep(10_000),
        10**5_000,
        '\udcff lone surrogate',
    ],
    ids=['object', 'dict-with-object', 'set', 'nan', 'non-utf8-bytes', 'cycle', 'deep', 'huge-int', 'surrogate'],
)
async def test_any_value_never_crashes_the_run(value: Any) -> None:
    capability = cap(Band(over=100, action=Truncate()))
    with warnings.catch_warnings():
        warnings.simplefilter(
            'ignore', OverflowingToolOutputWarning
        )  # unserializable values warn; that is tested below
        run = await run_tool(capability, value)
    assert run.returns()[0].outcome == 'success'
    assert isinstance(run.returns()[0].model_response_str(), str)  # the model-visible text can be produced


@pytest.mark.parametrize(
    'bands',
    [
        [Band(over=0, action=Passthrough())],
        [Band(over=10, action=Truncate(then=Passthrough()))],
        [Band(over=10, action=Truncate(then=None))],
        [],
    ],
    ids=['passthrough-band', 'truncate-then-passthrough', 'truncate-then-none', 'never-reduce'],
)
@pytest.mark.parametrize(
    ('value', 'expected'),
    [
        (Opaque(), IsStr(regex=r'(?s)"<.*Opaque object>".*')),  # a safe rendering, with a note when not cut
        (memoryview(b'abc' * 10), b'abc' * 10),
        ('\x1b[31mred\x1b[0m' * 5, 'red' * 5),
    ],
    ids=['object', 'memoryview', 'ansi'],
)
async def test_a_value_left_as_is_still_gets_the_safety_net(bands: list[Band], value: Any, expected: Any) -> None:
    """However a value ends up unreduced, what would crash the run is rendered and `strip_ansi` still applies."""
    capability = OverflowingToolOutput(bands=[], per_tool={'big': bands}, strip_ansi=True)
    with warnings.catch_warnings():
        warnings.simplefilter('ignore', OverflowingToolOutputWarning)
        run = await run_tool(capability, value)
    assert run.returns()[0].outcome == 'success'
    assert run.returned() == expected


async def test_unserializable_small_value_is_rendered_deterministically() -> None:
    with pytest.warns(OverflowingToolOutputWarning, match='cannot be serialized'):
        run = await run_tool(cap(Band(over=10_000, action=Truncate())), {'o': Opaque(), 's': {2, 1}})
    assert run.returned() == snapshot(
        '{"o":"<tests.overflowing_tool_output.test_capability.Opaque object>","s":[1,2]}\n'
        '[note: the tool returned a dict that cannot be serialized exactly; this is a best-effort rendering]'
    )


# --- isolation from errors -----------------------------------------------------------------------------------


async def test_model_retry_never_reaches_the_capability() -> None:
    capability = cap(Band(over=10, action=Truncate()))
    agent = Agent(
        _retry_then_finish_model(),
        capabilities=[capability],
    )
    attempts: list[int] = []

    @agent.tool
    def flaky(ctx: RunContext[Any]) -> str:
        attempts.append(ctx.retry)
        if ctx.retry == 0:
            raise ModelRetry('E' * 5_000)
        return 'fine'

    result = await agent.run('go')
    parts = [p for m in result.all_messages() for p in getattr(m, 'parts', []) if p.part_kind == 'tool-return']
    assert [p.outcome for p in parts] == ['retried', 'success']
    assert parts[0].content == 'E' * 5_000  # the full error reaches the model


async def test_an_exception_inside_the_hook_warns_and_keeps_the_result() -> None:
    def exploding_filter(ctx: RunContext[Any], tool_def: ToolDefinition) -> bool:
        raise RuntimeError('filter bug')

    text = 'r' * 20_000
    with pytest.warns(OverflowingToolOutputWarning, match='failed on the result of `big`'):
        run = await run_tool(cap(Band(over=10, action=Truncate()), tool_filter=exploding_filter), text)
    assert run.returned() == text


# --- spill fallbacks ---------------------------------------------------------------------------------------------


async def test_failing_store_falls_back_to_truncate() -> None:
    capability = OverflowingToolOutput(store=FailingStore())
    with pytest.warns(
        OverflowingToolOutputWarning,
        match=r'Spill could not reduce .*No space left on device.*; falling back to Truncate',
    ):
        run = await run_tool(capability, 'L\n' * 20_000)
    assert len(run.returned()) <= 5_000
    assert 'not kept' in run.returned()


async def test_failing_store_without_then_passes_through_with_a_warning() -> None:
    capability = cap(Band(over=100, action=Spill(then=None)), store=FailingStore())
    with pytest.warns(OverflowingToolOutputWarning, match='leaving it as is'):
        run = await run_tool(capability, 'p' * 5_000)
    assert run.returned() == 'p' * 5_000


# --- helpers ------------------------------------------------------------------------------------------------------


def _retry_then_finish_model() -> Any:
    from pydantic_ai.messages import ModelMessage, ModelResponse, TextPart, ToolCallPart
    from pydantic_ai.models.function import AgentInfo, FunctionModel

    def respond(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        if len(messages) < 5:
            return ModelResponse(parts=[ToolCallPart('flaky', {}, tool_call_id=f'c{len(messages)}')])
        return ModelResponse(parts=[TextPart('done')])

    return FunctionModel(respond)


def _ctx() -> RunContext[None]:
    from pydantic_ai.models.test import TestModel
    from pydantic_ai.usage import RunUsage

    return RunContext(deps=None, model=TestModel(), usage=RunUsage(), run_id='r1', tool_call_id='c1')


def _call() -> Any:
    from pydantic_ai.messages import ToolCallPart

    return ToolCallPart('big', {}, tool_call_id='c1')
