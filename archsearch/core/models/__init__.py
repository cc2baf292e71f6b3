"""Model families by registry name. Importing this package registers every family.

A new family is a module here plus one name in the import below.
"""

from archsearch.core.models import cnn, mlp, mobilenet, mobilenet_dnw, neural_graph, vgg  # noqa: F401
from archsearch.core.models.registry import Architecture, create_model, list_models, register_model

__all__ = ["Architecture", "create_model", "list_models", "register_model"]
