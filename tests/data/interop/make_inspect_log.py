"""Write tests/data/interop/mockllm.eval with inspect-ai itself (its offline `mockllm/model`):
a two-sample task, each sample a system prompt and a user message answered by the mock model,
then a second user turn answered again (a conversation of two replies). The harness's Inspect
import is tested on this file, written by Inspect, not only on its own export.

    .venv/bin/python tests/data/interop/make_inspect_log.py [OUT.eval]
"""

from __future__ import annotations

import shutil
import sys
import tempfile
from pathlib import Path

from inspect_ai import Task, eval
from inspect_ai.dataset import Sample
from inspect_ai.model import (
    ChatMessageSystem,
    ChatMessageUser,
    ModelOutput,
    ModelUsage,
    get_model,
)
from inspect_ai.scorer import includes
from inspect_ai.solver import generate, solver, user_message

SYSTEM = "Réponds toujours en français, sans virgules."
REPLIES = [
    "Bonjour je suis ravi de vous aider aujourd'hui avec votre commande.",
    "Votre colis arrive demain matin chez vous sans aucun doute.",
    "Hello, I can certainly help you with your order today, no problem.",
    "Le remboursement sera fait dans trois jours ouvrables.",
]


@solver
def second_turn():
    """A user turn after the first reply (a conversation, as the harness scores them)."""
    return user_message("Et ensuite ?")


def _output(reply: str) -> ModelOutput:
    # usage given: without it mockllm counts tokens with tiktoken, which downloads its encoding
    output = ModelOutput.from_content("mockllm/model", reply)
    output.usage = ModelUsage(input_tokens=10, output_tokens=len(reply.split()), total_tokens=20)
    return output


def build(out: Path) -> Path:
    model = get_model(
        "mockllm/model",
        custom_outputs=[_output(reply) for reply in REPLIES],
    )
    samples = [
        Sample(id=f"ticket-{k}", target="commande",
               input=[ChatMessageSystem(content=SYSTEM), ChatMessageUser(content=question)],
               metadata={"channel": "chat"})
        for k, question in enumerate(["Où est ma commande ?", "Je veux un remboursement."])
    ]  # fmt: skip
    task = Task(dataset=samples, solver=[generate(), second_turn(), generate()],
                scorer=includes(), name="mock_support")  # fmt: skip
    with tempfile.TemporaryDirectory() as tmp:
        [log] = eval(task, model=model, log_dir=tmp, log_format="eval", display="none",
                     max_samples=1)  # fmt: skip
        assert log.status == "success", log.error
        out.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(log.location, out)
    return out


if __name__ == "__main__":
    default = Path(__file__).with_name("mockllm.eval")
    print(build(Path(sys.argv[1]) if len(sys.argv) > 1 else default))
