"""pinbench recipes: each subpackage ``pinbench_recipes.<pkg>`` is one benchmark, declared by its recipe.yaml.

This package is the ``recipes/`` directory of the repository (setuptools maps it); nothing here may import
anything heavy, because the core locates recipes through it without importing their code.
"""
