"""The wire format: pydantic models of every request and response, one module per
resource (`jobs`, `artifacts`, `datasets`, `queue`, `errors`), shared by the API and the
typed client. Needs only pydantic and the standard library (an import contract says so)."""
