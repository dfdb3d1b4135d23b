"""`python -m pydantic_ai_harness.overflowing_tool_output`: the operator CLI over a spill store."""

from __future__ import annotations

import sys

from ._cli import main

sys.exit(main())
