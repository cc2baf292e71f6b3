"""The wire format: pydantic models of every request and response, one module per
resource, shared by the API and the typed client. Needs only pydantic."""
