"""The starter `harness init` writes for a system prompt: the language its replies are checked
for (`starter.language`), requests phrased around its domain (`starter.requests`, texts in
`starter.texts`) and the two YAML files (`starter.files`)."""
