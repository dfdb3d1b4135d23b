"""The query tools the model pages back with (`read_tool_result`, `grep_tool_result`): the toolset, handles and answers."""
