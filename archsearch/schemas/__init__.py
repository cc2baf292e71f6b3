"""The wire format: pydantic models of every request and response, shared by the API and the typed client. Needs only pydantic."""
