"""Images, documents and base64 blobs in tool returns: reduced without loss, like text (issue 35)."""
