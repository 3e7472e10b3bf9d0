"""Fixtures of the tool tests: Qwen2.5-Instruct's chat template (tools in the system turn,
calls written as Hermes `<tool_call>` JSON blocks, tool results as `<tool_response>` in a user
turn), the fixture tokenizer wearing it, and a sampling client that calls a tool, then answers
once it sees the tool's result."""

import os
from types import SimpleNamespace

from tests.test_server import TOKENIZER, FakeSamplingClient, make_policy

# Qwen/Qwen2.5-0.5B-Instruct's tokenizer_config.json `chat_template` (its default system
# prompt shortened).
QWEN25_TEMPLATE = (
    "{%- if tools %}\n"
    "    {{- '<|im_start|>system\\n' }}\n"
    "    {%- if messages[0]['role'] == 'system' %}\n"
    "        {{- messages[0]['content'] }}\n"
    "    {%- else %}\n"
    "        {{- 'You are a helpful assistant.' }}\n"
    "    {%- endif %}\n"
    "    {{- \"\\n\\n# Tools\\n\\nYou may call one or more functions to assist with the user query.\\n\\nYou are provided with function signatures within <tools></tools> XML tags:\\n<tools>\" }}\n"
    "    {%- for tool in tools %}\n"
    "        {{- \"\\n\" }}\n"
    "        {{- tool | tojson }}\n"
    "    {%- endfor %}\n"
    "    {{- \"\\n</tools>\\n\\nFor each function call, return a json object with function name and arguments within <tool_call></tool_call> XML tags:\\n<tool_call>\\n{\\\"name\\\": <function-name>, \\\"arguments\\\": <args-json-object>}\\n</tool_call><|im_end|>\\n\" }}\n"
    "{%- else %}\n"
    "    {%- if messages[0]['role'] == 'system' %}\n"
    "        {{- '<|im_start|>system\\n' + messages[0]['content'] + '<|im_end|>\\n' }}\n"
    "    {%- else %}\n"
    "        {{- '<|im_start|>system\\nYou are a helpful assistant.<|im_end|>\\n' }}\n"
    "    {%- endif %}\n"
    "{%- endif %}\n"
    "{%- for message in messages %}\n"
    "    {%- if (message.role == \"user\") or (message.role == \"system\" and not loop.first) or (message.role == \"assistant\" and not message.tool_calls) %}\n"
    "        {{- '<|im_start|>' + message.role + '\\n' + message.content + '<|im_end|>' + '\\n' }}\n"
    "    {%- elif message.role == \"assistant\" %}\n"
    "        {{- '<|im_start|>' + message.role }}\n"
    "        {%- if message.content %}\n"
    "            {{- '\\n' + message.content }}\n"
    "        {%- endif %}\n"
    "        {%- for tool_call in message.tool_calls %}\n"
    "            {%- if tool_call.function is defined %}\n"
    "                {%- set tool_call = tool_call.function %}\n"
    "            {%- endif %}\n"
    "            {{- '\\n<tool_call>\\n{\"name\": \"' }}\n"
    "            {{- tool_call.name }}\n"
    "            {{- '\", \"arguments\": ' }}\n"
    "            {{- tool_call.arguments | tojson }}\n"
    "            {{- '}\\n</tool_call>' }}\n"
    "        {%- endfor %}\n"
    "        {{- '<|im_end|>\\n' }}\n"
    "    {%- elif message.role == \"tool\" %}\n"
    "        {%- if (loop.index0 == 0) or (messages[loop.index0 - 1].role != \"tool\") %}\n"
    "            {{- '<|im_start|>user' }}\n"
    "        {%- endif %}\n"
    "        {{- '\\n<tool_response>\\n' }}\n"
    "        {{- message.content }}\n"
    "        {{- '\\n</tool_response>' }}\n"
    "        {%- if loop.last or (messages[loop.index0 + 1].role != \"tool\") %}\n"
    "            {{- '<|im_end|>\\n' }}\n"
    "        {%- endif %}\n"
    "    {%- endif %}\n"
    "{%- endfor %}\n"
    "{%- if add_generation_prompt %}\n"
    "    {{- '<|im_start|>assistant\\n' }}\n"
    "{%- endif %}\n"
)

# A template that renders tools but writes a call in no format rl knows (Llama 3.1's JSON
# without tags, shortened): calls are never parsed out with it.
UNTAGGED_TEMPLATE = (
    "{%- if tools %}{{- '<|im_start|>system\\nTools:\\n' }}{%- for tool in tools %}{{- tool | tojson + '\\n' }}{%- endfor %}{{- '<|im_end|>\\n' }}{%- endif %}"
    "{%- for message in messages %}"
    "{%- if message.tool_calls %}{{- '<|im_start|>assistant\\n' }}{%- for call in message.tool_calls %}"
    "{{- '{\"name\": \"' + call.function.name + '\", \"parameters\": ' + call.function.arguments | tojson + '}' }}{%- endfor %}{{- '<|im_end|>\\n' }}"
    "{%- else %}{{- '<|im_start|>' + message.role + '\\n' + message.content + '<|im_end|>\\n' }}{%- endif %}"
    "{%- endfor %}"
    "{%- if add_generation_prompt %}{{- '<|im_start|>assistant\\n' }}{%- endif %}"
)

ADD_TOOL = {
    "type": "function",
    "function": {
        "name": "add",
        "description": "Adds two integers.",
        "parameters": {
            "type": "object",
            "properties": {"a": {"type": "integer"}, "b": {"type": "integer"}},
            "required": ["a", "b"],
        },
    },
}
CALL_TEXT = '<tool_call>\n{"name": "add", "arguments": {"a": 2, "b": 3}}\n</tool_call>'
ANSWER_TEXT = "The answer is 5."


def tokenizer(template=QWEN25_TEMPLATE):
    from transformers import AutoTokenizer

    loaded = AutoTokenizer.from_pretrained(TOKENIZER)
    loaded.chat_template = template
    return loaded


class ToolCallingClient(FakeSamplingClient):
    """Calls `add(2, 3)` (`CALL_TEXT`, then the end of the turn) until the prompt holds a tool
    response, then answers `ANSWER_TEXT`; every sampled token's logprob is -0.5."""

    def __init__(self, tok, call_text=CALL_TEXT):
        super().__init__()
        self.tok = tok
        self.call_text = call_text

    def completion(self, prompt_ids):
        text = self.tok.decode(prompt_ids, skip_special_tokens=False)
        said = ANSWER_TEXT if "<tool_response>" in text else self.call_text
        return self.tok.encode(said, add_special_tokens=False) + [self.tok.eos_token_id]

    async def sample(self, prompt, num_samples, sampling_params):
        ids = prompt.to_ints()
        self.calls.append((ids, num_samples, sampling_params))
        tokens = self.completion(ids)
        return SimpleNamespace(
            sequences=[SimpleNamespace(tokens=list(tokens), logprobs=[-0.5] * len(tokens), stop_reason="stop") for _ in range(num_samples)]
        )


def tool_policy(template=QWEN25_TEMPLATE, call_text=CALL_TEXT):
    """(policy, its sampling client, its tokenizer)."""
    tok = tokenizer(template)
    client = ToolCallingClient(tok, call_text)
    return make_policy(tokenizer=tok, client=client), client, tok


HAVE_TOKENIZER = os.path.isdir(TOKENIZER)
