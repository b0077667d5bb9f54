#include "engine/parallel/pipeline_executor.h"
#include "engine/comm/flight_frames.h"

#include <chrono>

#include <fmt/format.h>

#include "engine/backend/memory_sample.h"
#include "engine/comm/in_order_p2p.h"
#include "profiler/record/zones.h"

namespace us {

namespace {
constexpr int kActivation = 0, kGradient = 1;
}

PipelineExecutor::PipelineExecutor(ProcessGrid& grid, const PipelineShape& shape, std::vector<PipeAction> actions,
                                   std::vector<LocalChunk>& chunks, TrainState& state, Backend& backend,
                                   BatchSource& batches, int micro_batch, int seq)
    : m_grid(grid),
      m_shape(shape),
      m_actions(std::move(actions)),
      m_chunks(chunks),
      m_state(state),
      m_be(backend),
      m_batches(&batches),
      m_rows(micro_batch * seq) {
    US_ASSERT(!chunks.empty(), "a stage runs at least one chunk");
    // What crosses a stage boundary: the residual stream's rows on this rank, (R,C) (N/tp rows under sequence
    // parallelism), to the same tensor-parallel rank of the neighbouring stage.
    m_boundary_elements = chunks.front().model->shape().rows() * chunks.front().model->config().hidden;
    m_dtype = chunks.front().model->shape().dtype;
    m_tokens.resize(size_t(m_rows));
    m_targets.resize(size_t(m_rows));
}

LocalChunk& PipelineExecutor::local(int chunk) {
    for (auto& c : m_chunks)
        if (c.chunk == chunk) return c;
    US_ASSERT(false, "chunk {} is not on this rank", chunk);
}

// Messages are told apart by what they carry (their class: in-order transports such as NCCL keep activations and
// gradients in channels of their own, in_order_p2p.h), to which virtual stage, for which micro-batch.
int PipelineExecutor::tag(int kind, int target_vstage, int mb) const {
    return p2p_tag(kind, target_vstage * m_shape.micro_batches + mb);
}

void PipelineExecutor::post_receives(size_t from) {
    US_FLIGHT_FRAME("PipelineExecutor::post_receives", FrameDetail::none);
    const int S = virtual_stages(), pp = m_shape.pp;
    const int64_t elements = m_boundary_elements;
    for (size_t i = from; i < std::min(m_actions.size(), from + 2); ++i) {
        const PipeAction& a = m_actions[i];
        const int vs = a.chunk * pp + m_grid.pp_rank();
        const Key k{a.micro_batch, a.chunk};
        if (a.op == PipeOp::forward && vs > 0 && !m_recv_acts.count(k) && !m_inputs.count(k)) {
            Transfer t;
            t.buffer = m_be.allocator().allocate(size_t(elements) * dtype_size(m_dtype), MemCategory::comm_buffers,
                                                 "pipeline receive (activations)");
            t.handle = m_grid.pp_group().irecv(t.buffer.view(m_dtype, 0, elements), (vs - 1) % pp,
                                               tag(kActivation, vs, a.micro_batch));
            m_recv_acts.emplace(k, std::move(t));
        }
        if ((a.op == PipeOp::backward || a.op == PipeOp::backward_input) && vs < S - 1 && !m_recv_grads.count(k)) {
            Transfer t;
            t.buffer = m_be.allocator().allocate(size_t(elements) * dtype_size(m_dtype), MemCategory::comm_buffers,
                                                 "pipeline receive (output gradient)");
            t.handle = m_grid.pp_group().irecv(t.buffer.view(m_dtype, 0, elements), (vs + 1) % pp,
                                               tag(kGradient, vs, a.micro_batch));
            m_recv_grads.emplace(k, std::move(t));
        }
    }
}

Tensor PipelineExecutor::take_received(std::map<Key, Transfer>& pending, Key k, Allocation& keep) {
    auto it = pending.find(k);
    US_ASSERT(it != pending.end(), "no receive posted for micro-batch {} chunk {}", k.mb, k.chunk);
    it->second.handle->wait();
    keep = std::move(it->second.buffer);
    pending.erase(it);
    const int64_t elements = m_boundary_elements;
    return keep.view(m_dtype, 0, elements);
}

// A transfer to the next or previous stage; --hang-kind p2p turns the step's first one into a receive.
CommHandle PipelineExecutor::send(Tensor buf, int peer, int tag) {
    if (m_hang && m_hang->fires(HangFault::p2p)) m_hang->receive_instead_of_send(m_grid.pp_group(), buf, peer, tag);
    return m_grid.pp_group().isend(buf, peer, tag);
}

void PipelineExecutor::reap_sends(bool wait) {
    std::erase_if(m_sends, [&](Transfer& t) {
        if (wait) t.handle->wait();
        return t.handle->test();
    });
}

void PipelineExecutor::forward(const PipeAction& a, int64_t step_index) {
    US_FLIGHT_FRAME("PipelineExecutor::forward", FrameDetail::micro_batch);
    const int pp = m_shape.pp, vs = a.chunk * pp + m_grid.pp_rank();
    const Key k{a.micro_batch, a.chunk};
    US_PROF_PHASE(prof::Phase::forward, a.micro_batch, a.chunk);
    record_memory_sample(m_be);
    // Waiting for the input is the bubble, not forward work: it stays outside the F span.
    Tensor input;
    if (vs > 0) {
        input = take_received(m_recv_acts, k, m_inputs[k]);
        m_inputs[k].recategorize(MemCategory::activations, "pipeline input (received activations)");
    }
    US_PROF_ZONE(prof::Lane::compute, prof::SpanKind::phase, prof::OpClass::none, US_PROF_NAME("F"));
    m_batches->fill(step_index, a.micro_batch, m_tokens.data(), m_targets.data());
    ChunkActivations& acts = m_acts[k];
    acts.micro_batch_index = a.micro_batch;
    GPT& model = *local(a.chunk).model;
    const auto began = std::chrono::steady_clock::now();
    model.forward(acts, MicroBatch{m_tokens.data(), m_targets.data()}, input, m_state);  // the loss: deferred
    inject_slowdown(began);
    if (vs < virtual_stages() - 1)
        m_output_sends[k] = send(model.output(acts), (vs + 1) % pp, tag(kActivation, vs + 1, a.micro_batch));
}

void PipelineExecutor::backward(const PipeAction& a, float grad_scale) {
    US_FLIGHT_FRAME("PipelineExecutor::backward", FrameDetail::micro_batch);
    const int pp = m_shape.pp, vs = a.chunk * pp + m_grid.pp_rank();
    const Key k{a.micro_batch, a.chunk};
    const bool weight = a.op == PipeOp::backward_weight;
    US_PROF_PHASE(prof::Phase::backward, a.micro_batch, a.chunk);
    record_memory_sample(m_be);
    GPT& model = *local(a.chunk).model;
    ChunkActivations& acts = m_acts.at(k);
    if (weight) {
        US_PROF_ZONE(prof::Lane::compute, prof::SpanKind::phase, prof::OpClass::none, US_PROF_NAME("W"));
        // The chunk's last micro-batch finishes its gradients: backwards of a chunk run in micro-batch order.
        m_state.begin_backward(a.micro_batch, a.micro_batch == m_shape.micro_batches - 1);
        const auto began = std::chrono::steady_clock::now();
        model.backward(acts, Tensor{}, Tensor{}, grad_scale, m_state, BackwardPart::weight);
        inject_slowdown(began);
        m_acts.erase(k);
        return;
    }
    // Waiting for the output gradient (and for the send of the output this backward frees) stays outside the
    // B span, like the forward's wait for its input.
    Allocation dout_buffer, dinput_buffer;
    Tensor dout, dinput;
    if (vs < virtual_stages() - 1) dout = take_received(m_recv_grads, k, dout_buffer);
    if (auto s = m_output_sends.find(k); s != m_output_sends.end()) {
        s->second->wait();
        m_output_sends.erase(s);
    }
    US_PROF_ZONE(prof::Lane::compute, prof::SpanKind::phase, prof::OpClass::none, US_PROF_NAME("B"));
    m_state.begin_backward(a.micro_batch, a.micro_batch == m_shape.micro_batches - 1);
    const int64_t elements = m_boundary_elements;
    if (vs > 0) {
        dinput_buffer = m_be.allocator().allocate(size_t(elements) * dtype_size(m_dtype), MemCategory::temporaries,
                                                  "pipeline input gradient (to send)");
        dinput = dinput_buffer.view(m_dtype, 0, elements);
    }
    const bool split = a.op == PipeOp::backward_input;
    const auto began = std::chrono::steady_clock::now();
    model.backward(acts, dout, dinput, grad_scale, m_state, split ? BackwardPart::input : BackwardPart::full);
    inject_slowdown(began);
    if (vs > 0) {
        Transfer t;
        t.handle = send(dinput, (vs - 1) % pp, tag(kGradient, vs - 1, a.micro_batch));
        dinput_buffer.recategorize(MemCategory::comm_buffers, "pipeline send (input gradient)");
        t.buffer = std::move(dinput_buffer);
        m_sends.push_back(std::move(t));
    }
    m_inputs.erase(k);  // the backward consumed the chunk's input
    if (!split) m_acts.erase(k);
}

void PipelineExecutor::inject_slowdown(std::chrono::steady_clock::time_point began) {
    if (!m_slowdown || !m_slowdown->active()) return;
    m_be.synchronize();  // a GPU's phase ends when its kernels do
    m_slowdown->after(std::chrono::duration<double>(std::chrono::steady_clock::now() - began).count());
}

double PipelineExecutor::run_step(int64_t step_index, float grad_scale) {
    US_FLIGHT_FRAME("PipelineExecutor::run_step", FrameDetail::none);
    m_loss_sum = 0;
    for (auto& c : m_chunks) c.model->defer_loss(true);  // the losses are read once, after the step's backward
    m_state.begin_step();
    for (size_t i = 0; i < m_actions.size(); ++i) {
        post_receives(i);
        const PipeAction& a = m_actions[i];
        if (a.op == PipeOp::forward)
            forward(a, step_index);
        else
            backward(a, grad_scale);
        reap_sends(false);
    }
    for (auto& [k, h] : m_output_sends) h->wait();
    m_output_sends.clear();
    reap_sends(true);
    US_ASSERT(m_acts.empty() && m_recv_acts.empty() && m_recv_grads.empty(), "the schedule left work behind");
    // The micro-batches' losses, added on the device in forward order: read once, after the step's backward.
    bool head = false;
    for (const auto& c : m_chunks) head = head || c.model->has_head();
    m_loss_sum = head ? m_be.take_deferred_sum() : 0.0;
    for (auto& c : m_chunks) c.model->defer_loss(false);  // a forward outside a step reads its own loss
    return m_loss_sum;
}

}  // namespace us
