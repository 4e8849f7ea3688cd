"""Policy rules that several tests' policy files share, as YAML list items (indented for `rules:`), so a
rule a test names (and asserts on, e.g. its reason) is written once."""

NEVER_DELETE_PROD = """\
  - name: never-delete-prod
    tool: delete_*
    params: {env: prod}
    effect: deny
    reason: prod is deleted by people only
"""

READS_ARE_FINE = """\
  - name: reads-are-fine
    tool: read_*
    effect: allow
    tier: low
"""
