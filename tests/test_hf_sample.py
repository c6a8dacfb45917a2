"""trainer/rollout/hf_sample.py: the CPU sampler of the `hf:` policy and the CPU rollout engine
keeps exactly the tokens transformers' top-k and top-p warpers keep (vLLM's order), draws from
their renormalized distribution, and decodes greedily as `generate` does."""

import pytest

torch = pytest.importorskip("torch")
from transformers import Qwen3Config, Qwen3ForCausalLM, TopKLogitsWarper, TopPLogitsWarper  # noqa: E402

from trainer.rollout.hf_sample import Prefix, keep, sample  # noqa: E402


def warped(scaled, top_k, top_p):
    scores = scaled[None].clone()
    if top_k:
        scores = TopKLogitsWarper(top_k)(None, scores)
    if top_p < 1:
        scores = TopPLogitsWarper(top_p)(None, scores)
    return scores[0]


@pytest.mark.parametrize("top_k, top_p", [(20, 0.95), (20, 1.0), (0, 0.9), (5, 0.5), (1, 0.95), (50, 0.3)])
def test_the_kept_tokens_and_their_logprobs_are_the_warpers(top_k, top_p):
    g = torch.Generator().manual_seed(top_k * 100 + int(top_p * 100))
    for _ in range(20):
        scaled = torch.randn(2000, generator=g) * 3
        ids, values = keep(scaled, top_k, top_p)
        ref = warped(scaled, top_k, top_p)
        assert sorted(ids.tolist()) == torch.nonzero(ref > -float("inf")).squeeze(1).tolist()
        assert values.tolist() == sorted(values.tolist(), reverse=True)  # most likely first
        assert torch.log_softmax(values, -1).tolist() == pytest.approx(torch.log_softmax(ref, -1)[ids].tolist(), abs=1e-5)


def test_ties_at_the_kth_value_are_kept_like_the_warper():
    scaled = torch.tensor([3.0, 1.0, 2.0, 2.0, 0.0])
    ids, _ = keep(scaled, 2, 1.0)
    assert sorted(ids.tolist()) == [0, 2, 3]


def test_the_draw_follows_the_kept_distribution():
    """20k draws from 3 kept tokens of 6: frequencies within 4 standard errors of the warped probabilities."""
    scaled = torch.tensor([2.0, 1.5, 1.0, -1.0, -2.0, -3.0])
    model = Constant(scaled)
    g = torch.Generator().manual_seed(0)
    counts = torch.zeros(6)
    for _ in range(2000):
        for tok in sample(model, [0], 10, temperature=1.0, top_k=3, top_p=1.0, generator=g).ids:
            counts[tok] += 1
    p = torch.softmax(warped(scaled, 3, 1.0), -1)
    n = counts.sum()
    assert counts[3:].sum() == 0
    se = (p * (1 - p) / n).sqrt()
    assert ((counts / n - p).abs() <= 4 * se + 1e-9).all(), (counts / n, p)


def test_nothing_cut_draws_from_the_whole_softmax_with_its_logprobs():
    """top_k off and top_p 1: the draw reads softmax(logits / T) directly (no sort); every token can
    come, at its frequency, and both log-probs are log_softmax(logits / T) of the drawn token."""
    scaled = torch.tensor([2.0, 1.5, 1.0, -1.0, -2.0, -3.0])
    model = Constant(scaled * 0.5)  # temperature 0.5 gives back `scaled`
    g = torch.Generator().manual_seed(1)
    counts, lp = torch.zeros(6), torch.log_softmax(scaled, -1)
    for _ in range(2000):
        turn = sample(model, [0], 10, temperature=0.5, top_k=0, top_p=1.0, generator=g)
        for tok, a, b in zip(turn.ids, turn.logprobs, turn.raw_logprobs):
            counts[tok] += 1
            assert a == b == pytest.approx(float(lp[tok]), abs=1e-6)
    p, n = torch.softmax(scaled, -1), counts.sum()
    assert (counts > 0).all()
    assert ((counts / n - p).abs() <= 4 * (p * (1 - p) / n).sqrt() + 1e-9).all(), (counts / n, p)


class Constant(torch.nn.Module):
    """A causal LM whose next-token logits are always `logits` (to test the draw alone)."""

    def __init__(self, logits):
        super().__init__()
        self.logits = logits

    def forward(self, input_ids, past_key_values=None, use_cache=True, logits_to_keep=0):
        from types import SimpleNamespace

        return SimpleNamespace(logits=self.logits.expand(1, input_ids.shape[1], -1), past_key_values=None)


@pytest.fixture(scope="module")
def tiny():
    torch.manual_seed(0)
    config = Qwen3Config(vocab_size=512, hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                         num_attention_heads=2, num_key_value_heads=1, head_dim=16, max_position_embeddings=1024)
    return Qwen3ForCausalLM(config).eval()


def test_greedy_is_generates_greedy_and_stops_on_a_stop_id(tiny):
    prompt = [5, 17, 42, 7]
    turn = sample(tiny, prompt, 12, temperature=0)
    with torch.inference_mode():
        ref = tiny.generate(torch.tensor([prompt]), do_sample=False, max_new_tokens=12, min_new_tokens=12,
                            pad_token_id=0)[0, len(prompt):].tolist()
    assert turn.ids == ref and not turn.stopped
    cut = sample(tiny, prompt, 12, temperature=0, stop_ids=[ref[3]])
    assert cut.ids == ref[:ref.index(ref[3]) + 1] and cut.stopped


def test_logprobs_of_a_sampled_turn_are_its_distributions_and_a_seed_repeats_it(tiny):
    prompt = [5, 17, 42, 7]
    turn = sample(tiny, prompt, 10, temperature=0.7, top_k=20, top_p=0.9, generator=torch.Generator().manual_seed(3))
    again = sample(tiny, prompt, 10, temperature=0.7, top_k=20, top_p=0.9, generator=torch.Generator().manual_seed(3))
    assert again.ids == turn.ids and again.logprobs == turn.logprobs
    with torch.inference_mode():
        logits = tiny(torch.tensor([prompt + turn.ids])).logits[0, len(prompt) - 1:-1].float() / 0.7
    for i, tok in enumerate(turn.ids):
        ref = warped(logits[i], 20, 0.9)
        assert turn.logprobs[i] == pytest.approx(float(torch.log_softmax(ref, -1)[tok]), abs=1e-4)
        assert turn.raw_logprobs[i] == pytest.approx(float(torch.log_softmax(logits[i], -1)[tok]), abs=1e-4)


def test_the_same_seed_draws_the_same_token_where_two_distributions_differ_little():
    """The noise belongs to the token id (an exponential race, as vLLM's sampler): two nearly tied
    tokens that swap places between two models change the draw for a few seeds, not for all of
    them, as a draw by rank would (the 1st token for u < p1, whichever token is 1st)."""
    a = torch.tensor([0.0, 0.02, -3.0, -4.0])  # token 1 a little more likely than token 0
    b = torch.tensor([0.02, 0.0, -3.0, -4.0])  # the two swapped
    model_a, model_b = Constant(a), Constant(b)
    changed, picked0 = 0, 0
    for seed in range(400):
        x = sample(model_a, [0], 1, top_k=3, top_p=1.0, generator=torch.Generator().manual_seed(seed)).ids[0]
        y = sample(model_b, [0], 1, top_k=3, top_p=1.0, generator=torch.Generator().manual_seed(seed)).ids[0]
        changed += x != y
        picked0 += x == 0
    assert changed <= 0.05 * 400, changed  # the probabilities moved by ~0.005 each
    assert 0.35 * 400 < picked0 < 0.6 * 400  # and each model still draws both at their rates


def test_the_race_is_the_categorical_distribution_of_any_slice_of_the_vocabulary():
    from trainer.rollout.hf_sample import race

    ids, values = torch.tensor([7, 3, 150000]), torch.tensor([1.0, 0.0, -1.0])
    g = torch.Generator().manual_seed(5)
    counts = torch.zeros(3)
    for _ in range(6000):
        counts[race(ids, values, g)] += 1
    p = torch.softmax(values, -1)
    assert ((counts / 6000 - p).abs() <= 4 * (p * (1 - p) / 6000).sqrt()).all(), counts


def test_a_prefix_prefills_only_what_each_turn_adds_and_draws_what_a_whole_prefill_draws(tiny):
    """An episode's turns with its `Prefix`: each turn reuses the keys and values of the history it
    extends (the last prompt token is run again for its logits) and draws the ids a prefill of the
    whole context draws with the same seeds, their log-probs equal up to float rounding; a prompt
    that departs from the history (a re-rendered turn) reuses only the common part; a capped turn
    leaves the cache holding every id but its last."""
    g = torch.Generator().manual_seed(1)
    history = torch.randint(0, 512, (40,), generator=g).tolist()
    prefix = Prefix()
    prompt, expected = list(history), 0
    for n in range(4):
        kw = dict(temperature=0.8, top_k=50, top_p=0.95, generator=torch.Generator().manual_seed(n))
        cached = sample(tiny, prompt, 6 + n, prefix=prefix, **kw)
        whole = sample(tiny, prompt, 6 + n, **{**kw, "generator": torch.Generator().manual_seed(n)})
        assert cached.ids == whole.ids and not cached.stopped
        assert cached.raw_logprobs == pytest.approx(whole.raw_logprobs, abs=1e-5)
        assert prefix.ids == (prompt + cached.ids)[:-1] and prefix.past.get_seq_length() == len(prefix.ids)
        assert cached.reused == expected  # turn 0: nothing; then the last turn's prompt and ids but its last
        expected = len(prompt) + len(cached.ids) - 1
        prompt = prompt + cached.ids + torch.randint(0, 512, (5,), generator=g).tolist()  # a tool result
    edited = prompt[:30] + [(prompt[30] + 1) % 512] + prompt[31:]  # history re-rendered from token 30 on
    turn = sample(tiny, edited, 4, temperature=0, prefix=prefix)
    assert turn.reused == 30 and turn.ids == sample(tiny, edited, 4, temperature=0).ids
    again = sample(tiny, edited, 4, temperature=0, prefix=prefix)  # the same prompt: all but its last token
    assert again.reused == len(edited) - 1 and again.ids == turn.ids


@pytest.fixture(scope="module")
def hybrid():
    """A tiny Qwen3.5 text model: three Gated-DeltaNet (linear-attention) layers, then one attention layer."""
    from transformers import Qwen3_5ForCausalLM, Qwen3_5TextConfig

    torch.manual_seed(0)
    config = Qwen3_5TextConfig(vocab_size=512, hidden_size=32, intermediate_size=64, num_hidden_layers=4,
                               num_attention_heads=2, num_key_value_heads=1, head_dim=16, linear_key_head_dim=16,
                               linear_value_head_dim=16, linear_num_key_heads=2, linear_num_value_heads=2,
                               max_position_embeddings=1024)
    return Qwen3_5ForCausalLM(config).eval()


def test_a_hybrid_cache_is_reused_only_where_the_prompt_extends_it(hybrid):
    """A linear-attention layer's state covers the whole sequence and cannot be cut back: a prompt
    that departs from the cached history is prefilled whole (reusing the attention layers' cut
    cache would leave the departed tokens in the recurrent states: log-probs off by ~1e-4), while
    an episode's next turn, which extends it, reuses all of it and draws what a whole prefill draws."""
    g = torch.Generator().manual_seed(3)
    prompt = torch.randint(0, 512, (40,), generator=g).tolist()
    prefix = Prefix()
    first = sample(hybrid, prompt, 8, temperature=0, prefix=prefix)
    nxt = prompt + first.ids + torch.randint(0, 512, (6,), generator=g).tolist()
    cached, whole = sample(hybrid, nxt, 8, temperature=0, prefix=prefix), sample(hybrid, nxt, 8, temperature=0)
    assert cached.reused == len(prompt) + len(first.ids) - 1
    assert cached.ids == whole.ids and cached.raw_logprobs == pytest.approx(whole.raw_logprobs, abs=1e-5)
    edited = nxt[:20] + [(nxt[20] + 1) % 512] + nxt[21:]
    turn, whole = sample(hybrid, edited, 8, temperature=0, prefix=prefix), sample(hybrid, edited, 8, temperature=0)
    assert turn.reused == 0
    assert turn.ids == whole.ids and turn.raw_logprobs == pytest.approx(whole.raw_logprobs, abs=1e-6)
