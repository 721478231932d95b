"""Preset YAML configs (package data: marft.yaml, marft_shared.yaml, ippo.yaml)."""
