"""Payload access and search under the query tools: line windows, grep scans, patterns, JSONPath."""
