"""Teams, users and API tokens of a team deployment."""
