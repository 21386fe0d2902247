"""A workflow's definition: the spec, the Python builder, the YAML loader, user code, diagrams."""
