"""Templates and conversations for the chat-template tests (tests/text/test_chat_template.cpp).

LLAMA3 is the plain Llama-3 Instruct template (header ids, trim, bos on the first turn);
LLAMA3_TOOLS is written here in the style of the Llama-3.1 tool template (system slot, tools
as indented JSON in the first user turn, one tool call per assistant turn, ipython turns), to
exercise what those templates use: top-level set, slices, trim, items, reject('equalto'),
tojson(indent=4), `in` on dicts, is mapping/iterable, raise_exception, whitespace control.
"""

import json
import random

LLAMA3 = ("{% set loop_messages = messages %}{% for message in loop_messages %}{% set content = '<|start_header_id|>' + "
          "message['role'] + '<|end_header_id|>\n\n'+ message['content'] | trim + '<|eot_id|>' %}{% if loop.index0 == 0 %}"
          "{% set content = bos_token + content %}{% endif %}{{ content }}{% endfor %}{% if add_generation_prompt %}"
          "{{ '<|start_header_id|>assistant<|end_header_id|>\n\n' }}{% endif %}")

LLAMA3_TOOLS = """{{- bos_token }}
{%- if not date_string is defined %}
    {%- set date_string = "01 Dec 2026" %}
{%- endif %}
{#- The system turn comes first, whether or not the conversation has one. #}
{%- if messages[0]['role'] == 'system' %}
    {%- set system_message = messages[0]['content']|trim %}
    {%- set messages = messages[1:] %}
{%- else %}
    {%- set system_message = "" %}
{%- endif %}
{{- "<|start_header_id|>system<|end_header_id|>\\n\\n" }}
{%- if tools is not none %}
    {{- "Environment: ipython\\n" }}
    {{- "Tools: " + tools | map(attribute='function') | map(attribute='name') | reject('equalto', 'code_interpreter') | join(", ") + "\\n" }}
{%- endif %}
{{- "Today Date: " + date_string + "\\n\\n" }}
{{- system_message }}
{{- "<|eot_id|>" }}
{%- if tools is not none %}
    {%- if messages | length != 0 %}
        {%- set first_user_message = messages[0]['content']|trim %}
        {%- set messages = messages[1:] %}
    {%- else %}
        {{- raise_exception("Cannot put tools in the first user message when there's no first user message!") }}
    {%- endif %}
    {{- '<|start_header_id|>user<|end_header_id|>\\n\\n' -}}
    {{- "Given the following functions, respond with a JSON for a function call.\\n\\n" }}
    {%- for t in tools %}
        {{- t | tojson(indent=4) }}
        {{- "\\n\\n" }}
    {%- endfor %}
    {{- first_user_message + "<|eot_id|>"}}
{%- endif %}
{%- for message in messages %}
    {%- if not (message.role == 'ipython' or message.role == 'tool' or 'tool_calls' in message) %}
        {{- '<|start_header_id|>' + message['role'] + '<|end_header_id|>\\n\\n'+ message['content'] | trim + '<|eot_id|>' }}
    {%- elif 'tool_calls' in message %}
        {%- if not message.tool_calls|length == 1 %}
            {{- raise_exception("This model only supports single tool-calls at once!") }}
        {%- endif %}
        {%- set tool_call = message.tool_calls[0].function %}
        {{- '<|start_header_id|>assistant<|end_header_id|>\\n\\n' -}}
        {{- '{"name": "' + tool_call.name + '", ' }}
        {{- '"parameters": ' }}
        {%- if tool_call.arguments is string %}
            {{- tool_call.arguments }}
        {%- else %}
            {%- for key, value in tool_call.arguments | items %}
                {{- (key ~ '=' ~ value) if loop.first else (', ' ~ key ~ '=' ~ value) }}
            {%- endfor %}
        {%- endif %}
        {{- "}" }}
        {{- "<|eot_id|>" }}
    {%- elif message.role == "tool" or message.role == "ipython" %}
        {{- "<|start_header_id|>ipython<|end_header_id|>\\n\\n" }}
        {%- if message.content is mapping or message.content is iterable %}
            {{- message.content | tojson }}
        {%- else %}
            {{- message.content }}
        {%- endif %}
        {{- "<|eot_id|>" }}
    {%- endif %}
{%- endfor %}
{%- if add_generation_prompt %}
    {{- '<|start_header_id|>assistant<|end_header_id|>\\n\\n' }}
{%- endif %}
"""

TEXTS = ["What is 17 * 23?", "  Explain RL in one line.  ", "Write code:\n```python\nprint('hi')\n```", "日本語で答えて。",
         "مرحبا", "emoji 🚀 test", "<tool_response>\n{\"ok\": true}\n</tool_response>", "tabs\tand\nnewlines\n\n",
         "a 'quoted' \"word\"", "", "The answer is \\boxed{42}.", "x" * 40]


def text(rng):
    return "".join(rng.choice(TEXTS) for _ in range(rng.randint(1, 2)))


def tool(rng, i):
    return {"type": "function",
            "function": {"name": f"tool_{i}", "description": text(rng),
                         "parameters": {"type": "object",
                                        "properties": {"x": {"type": "number", "default": rng.choice([0.5, 1e-05, 3.0, 100])},
                                                       "flag": {"type": "boolean", "enum": [True, False]},
                                                       "name": {"type": "string", "description": "név ✓"}},
                                        "required": ["x"]}}}


def tool_call(rng, i):
    args = {"x": rng.choice([1, 2.5, -3]), "name": rng.choice(["a", "b c"]), "flag": rng.choice([True, False])}
    return {"type": "function",
            "function": {"name": f"tool_{i}", "arguments": json.dumps(args) if rng.random() < 0.5 else args}}


def assistant(rng, tools):
    content = text(rng)
    message = {"role": "assistant"}
    kind = rng.randrange(4)
    if kind == 1:
        content = "<think>\n" + text(rng) + "\n</think>\n\n" + content
    elif kind == 2:
        message["reasoning_content"] = text(rng)
    message["content"] = content
    if tools and rng.random() < 0.4:
        message["tool_calls"] = [tool_call(rng, rng.randrange(len(tools))) for _ in range(rng.choice([1, 1, 2]))]
    return message


def conversation(rng):
    tools = [tool(rng, i) for i in range(rng.randint(1, 3))] if rng.random() < 0.4 else None
    messages = []
    if rng.random() < 0.6:
        messages.append({"role": "system", "content": text(rng)})
    for _ in range(rng.randint(1, 3)):
        messages.append({"role": "user", "content": text(rng)})
        reply = assistant(rng, tools)
        messages.append(reply)
        for _ in reply.get("tool_calls", []):
            result = text(rng) if rng.random() < 0.7 else {"result": rng.choice([1, 2.5, None, True]), "items": ["a", 1]}
            messages.append({"role": "tool", "content": result})
    if rng.random() < 0.5:
        messages.append({"role": "user", "content": text(rng)})
    entry = {"messages": messages, "add_generation_prompt": rng.random() < 0.6}
    if tools is not None:
        entry["tools"] = tools
    thinking = rng.choice([None, True, False])
    if thinking is not None:
        entry["extra"] = {"enable_thinking": thinking}
    return entry


def conversations(count, seed, out):
    rng = random.Random(seed)
    with open(out, "w", encoding="utf-8") as f:
        for _ in range(count):
            f.write(json.dumps(conversation(rng), ensure_ascii=False) + "\n")


def render(folders, conversations_file):
    """Writes FOLDER/chat.jsonl for each folder (one Python start: importing transformers costs seconds)."""
    for folder in folders:
        render_one(folder, conversations_file, folder + "/chat.jsonl")


def render_one(folder, conversations_file, out):
    from transformers import AutoTokenizer
    tok = AutoTokenizer.from_pretrained(folder)
    with open(conversations_file, encoding="utf-8") as f, open(out, "w", encoding="utf-8") as o:
        for line in f:
            c = json.loads(line)
            try:
                text = tok.apply_chat_template(c["messages"], tools=c.get("tools"), add_generation_prompt=c["add_generation_prompt"],
                                               tokenize=False, **c.get("extra", {}))
                ids = tok.encode(text, add_special_tokens=False)  # what apply_chat_template(tokenize=True) does
                o.write(json.dumps({"text": text, "ids": ids}, ensure_ascii=False) + "\n")
            except Exception as e:  # the template raised: astraflow must raise too
                o.write(json.dumps({"error": str(e)}, ensure_ascii=False) + "\n")
