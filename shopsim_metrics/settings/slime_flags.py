"""The flags slime's ``train.py`` / ``train_async.py`` parser knows, for ``preflight``.

slime parses with ``ignore_unknown_args``: a misspelled flag is silently dropped and its value never
applies. ``preflight`` therefore names every flag slime does not know. When slime is importable (the
training image), the flags are read from slime's own parser (:func:`slime_parser_flags`); otherwise
from :data:`SLIME_FLAGS`, the same reading kept in the project, taken with THUDM/slime 624b824,
Megatron-LM 1dcf0dafa884ad52ffb243625717a3471643e087 and sglang 0.5.15.post1 by
``tests/slime_train/list_slime_flags.py`` (run it in the slime venv to renew it). ``--sglang-*`` flags
follow the installed SGLang's ``ServerArgs``, so any ``--sglang-`` flag is taken as known.

Example:
    >>> is_slime_flag("--over-sampling-batch-size"), is_slime_flag("--over-sampling-batch-szie")
    (True, False)
    >>> closest_slime_flag("--over-sampling-batch-szie")
    '--over-sampling-batch-size'
    >>> is_slime_flag("--sglang-anything"), is_slime_flag("--tensor-model-parallel-size")
    (True, True)
"""

from __future__ import annotations

import argparse
import contextlib
import difflib
import io
import sys
from collections.abc import Collection

SLIME_FLAGS: frozenset[str] = frozenset("--" + name for name in """
    account-for-embedding-in-pipeline-split account-for-loss-in-pipeline-split accumulate-allreduce-grads-in-fp32 activation-func-clamp-value actor-num-gpus-per-node
    actor-num-nodes adam-beta1 adam-beta2 adam-eps add-qkv-bias
    adlr-autoresume adlr-autoresume-interval advantage-estimator allgather-cp allow-ambiguous-pad-tokens
    app-tag-run-name app-tag-run-version apply-chat-template apply-chat-template-kwargs apply-layernorm-1p
    apply-query-key-layer-scaling apply-residual-connection-post-layernorm apply-wd-to-qk-layernorm async-save attention-backend
    attention-dropout attention-output-gate attention-softmax-in-fp32 auto-detect-ckpt-format balance-by-flops
    balance-data batch-invariant-mode batch-size bert-embedder-type bert-load
    bert-no-binary-head bf16 biencoder-projection-dim biencoder-shared-query-context-model block-data-path
    buffer-filter-path cache-mla-latents calc-ft-timeouts calculate-per-token-loss check-for-large-grads
    check-for-spiky-loss check-weight-hash-across-dp-replicas-interval check-weight-update-equal checkpoint-activations ci-disable-kl-checker
    ci-load-grad-norm ci-save-grad-norm ci-test ci-train-rollout-logprob-abs-diff-threshold ckpt-assume-constant-structure
    ckpt-convert-format ckpt-convert-save ckpt-convert-update-legacy-dist-opt-format ckpt-format ckpt-fully-parallel-load
    ckpt-fully-parallel-save ckpt-step classes-fraction clip-grad colocate
    config-logger-dir context-parallel-size cp-comm-type cpu-offloading-num-layers create-all-gather-group
    cross-entropy-fusion-impl cross-entropy-loss-fusion cuda-graph-impl cuda-graph-scope cuda-graph-warmup-steps
    custom-advantage-function-path custom-config-path custom-convert-samples-to-train-data-path custom-eval-rollout-log-function-path custom-generate-function-path
    custom-loss-function-path custom-megatron-before-log-prob-hook-path custom-megatron-before-train-step-hook-path custom-megatron-init-path custom-model-provider-path
    custom-pg-loss-reducer-function-path custom-reward-post-process-path custom-rm-path custom-rollout-log-function-path custom-tis-function-path
    custom-update-weight-post-write-path data-args-path data-cache-path data-pad-size-multiplier data-parallel-random-init
    data-parallel-sharding-strategy data-path data-per-class-fraction data-source-path dataloader-defer-npy-index-mmap
    dataloader-fast-cache-load dataloader-type ddp-average-in-collective ddp-bucket-size ddp-num-buckets
    ddp-pad-buckets-for-high-nccl-busbw ddp-reduce-scatter-with-fp32-accumulation debug-rollout-only debug-train-only decode-only-cuda-graphs
    decoder-first-pipeline-num-layers decoder-last-pipeline-num-layers decoder-num-layers decoder-seq-length decoupled-lr
    decoupled-min-lr decrease-batch-size-if-needed defer-embedding-wgrad-compute delay-wgrad-compute deterministic-mode
    dino-bottleneck-size dino-freeze-last-layer dino-head-hidden-size dino-local-crops-number dino-local-img-size
    dino-norm-last-layer dino-teacher-temp dino-warmup-teacher-temp dino-warmup-teacher-temp-epochs disable-async-tensor-model-parallel-allreduce
    disable-bf16-reduced-precision-matmul disable-bias-linear disable-chunked-prefill disable-ckpt-fully-parallel-save disable-clone-scatter-output-in-embedding
    disable-compute-advantages-and-returns disable-fp8-wgrad disable-gloo-process-groups disable-grpo-std-normalization disable-jit-fuser
    disable-log-loss-scale-to-tensorboard disable-mamba-mem-eff-path disable-manual-gc-eval disable-msc disable-rewards-normalization
    disable-rollout-global-dataset disable-straggler-on-startup disable-strict-fsdp-dtensor-load disable-symmetric-registration disable-tp-comm-bulk-dgrad
    disable-tp-comm-bulk-wgrad disable-tp-comm-overlap-ag disable-tp-comm-overlap-rs disable-tp-comm-split-ag disable-tp-comm-split-rs
    disable-use-tokenizer-model-from-checkpoint-args disable-wandb-random-suffix dist-ckpt-format dist-ckpt-optim-fully-reshardable dist-ckpt-save-pre-mcore-014
    dist-ckpt-strictness distrib-optim-fully-reshardable-mem-efficient distribute-saved-activations distributed-backend distributed-timeout-minutes
    distributed-timeout-seconds-after-init dsa-indexer-head-dim dsa-indexer-loss-coeff dsa-indexer-n-heads dsa-indexer-topk
    dsa-indexer-use-sparse-loss dump-details dump-param-to-param-group-map dynamic-sampling-filter-path embedding-init-method-std
    embedding-path empty-unused-memory-level enable-chunked-prefill enable-cuda-graph enable-experimental
    enable-ft-package enable-full-sharding-in-hsdp enable-mtp-training encoder-num-layers encoder-seq-length
    end-weight-decay entropy-coef eod-mask-loss ep-overlap-early-attn-memory-release eps-clip
    eps-clip-c eps-clip-high error-injection-rate error-injection-type eval-config
    eval-function-path eval-input-key eval-interval eval-iters eval-label-key
    eval-max-context-len eval-max-prompt-len eval-max-response-len eval-min-new-tokens eval-prompt-data
    eval-reward-key eval-temperature eval-tool-key eval-top-k eval-top-p
    evidence-data-path exit-duration-in-mins exit-interval exit-on-missing-checkpoint exit-signal
    exit-signal-handler exit-signal-handler-for-dataloader exp-avg-dtype exp-avg-sq-dtype experimental-attention-variant
    expert-model-parallel-size expert-tensor-parallel-size external-cuda-graph fake-process-group fallback-to-eager-attn
    fetch-trajectory-retry-times ffn-hidden-size fim-data fim-eod-token fim-fragment-rate
    fim-middle-token fim-no-prefix fim-pad-token fim-prefix-token fim-rate
    fim-split-sample fim-spm-rate fim-suffix-token fine-grained-activation-offloading finetune
    first-last-layers-bf16 flash-decode fp16 fp16-lm-cross-entropy fp32-residual-connection
    fp4-format fp4-param-gather fp4-quantizer-factory fp4-recipe fp8-amax-compute-algo
    fp8-amax-history-len fp8-format fp8-interval fp8-margin fp8-param-gather
    fp8-quantizer-factory fp8-recipe freeze-indexer freeze-params-name-list fsdp-double-buffer
    fsdp-manual-registration ft-num-warmup-iters full-validation gamma get-mismatch-metrics
    global-batch-size glu-linear-offset grad-reduce-in-bf16 group-query-attention group-rm
    grpo-clamp-eps-lower grpo-clamp-eps-upper grpo-entropy-term-weight grpo-filter-groups-with-same-reward grpo-group-size
    grpo-iterations grpo-kl-beta grpo-prompts-per-step head-lr-mult help
    heterogeneous-layers-config-encoded-json heterogeneous-layers-config-path hf-checkpoint hidden-dropout hidden-size
    hierarchical-context-parallel-sizes high-priority-stream-groups http-proxy hybrid-attention-ratio hybrid-context-parallel
    hybrid-mlp-ratio hybrid-override-pattern hysteresis ict-head-size ict-load
    img-h img-w indexer-batch-size indexer-log-interval inference-batch-times-seqlen-threshold
    inference-coordinator-port inference-dynamic-batching inference-dynamic-batching-block-size inference-dynamic-batching-buffer-size-gb inference-dynamic-batching-cuda-graph-max-tokens
    inference-dynamic-batching-cuda-graph-mixed-prefill-count inference-dynamic-batching-max-requests inference-dynamic-batching-max-tokens inference-dynamic-batching-num-cuda-graphs inference-dynamic-batching-paused-buffer-size-gb
    inference-dynamic-batching-track-paused-request-events inference-dynamic-batching-unified-memory-level inference-fuse-tp-communication inference-logging-step-interval inference-max-batch-size
    inference-max-requests inference-max-seq-length inference-rng-tracker inference-wandb-logging init-method-std
    init-method-xavier-uniform init-model-with-meta-device initial-loss-scale inprocess-active-world-size inprocess-barrier-timeout
    inprocess-completion-timeout inprocess-empty-cuda-cache inprocess-granularity inprocess-hard-timeout inprocess-heartbeat-interval
    inprocess-heartbeat-timeout inprocess-last-call-wait inprocess-max-iterations inprocess-monitor-process-interval inprocess-monitor-thread-interval
    inprocess-progress-watchdog-interval inprocess-restart inprocess-soft-timeout inprocess-termination-grace-time input-key
    is-hybrid-model iter-per-epoch iterations-to-skip keep-fp8-transpose-cache keep-old-actor
    kitchen-attention-backend kl-coef kl-loss-coef kl-loss-type kv-channels
    kv-lora-rank label-key lambd langrl-env-config langrl-external-server
    langrl-inference-server-conversation-template langrl-inference-server-type lazy-mpu-init legacy-tokenizer linear-attention-freq
    linear-attention-type linear-conv-kernel-dim linear-key-head-dim linear-num-key-heads linear-num-value-heads
    linear-value-head-dim load load-debug-rollout-data load-debug-rollout-data-subsample load-forge-rollout-data
    load-main-params-from-ckpt local-rank log-correct-samples log-device-memory-used log-energy
    log-interval log-max-attention-logit log-memory-interval log-memory-to-tensorboard log-multi-turn
    log-num-zeros-in-grad log-params-norm log-passrate log-probs-chunk-size log-probs-max-tokens-per-gpu
    log-progress log-reward-category log-straggler log-throughput log-timers-to-tensorboard
    log-validation-ppl-to-tensorboard log-world-size-to-tensorboard logging-level loss-mask-type loss-scale
    loss-scale-window loss-type lr lr-decay-iters lr-decay-samples
    lr-decay-style lr-warmup-fraction lr-warmup-init lr-warmup-iters lr-warmup-samples
    lr-wsd-decay-iters lr-wsd-decay-samples lr-wsd-decay-style main-grads-dtype main-params-dtype
    make-vocab-size-divisible-by mamba-head-dim mamba-num-groups mamba-num-heads mamba-state-dim
    manual-gc manual-gc-interval mask-factor mask-offpolicy-in-partial-rollout mask-prob
    mask-type max-position-embeddings max-seqlen-per-dp-cp-rank max-tokens-per-gpu max-tokens-to-oom
    megatron-config-path megatron-deepgemm-forward-layers megatron-deepgemm-forward-modules megatron-deepgemm-moe-forward-layers megatron-deepgemm-moe-forward-modules
    memory-recorder memory-snapshot-dir memory-snapshot-num-steps memory-snapshot-path merge-file
    metadata-key micro-batch-size microbatch-group-size-per-virtual-pipeline-stage mid-level-dataset-surplus min-batch-collection-ratio
    min-loss-scale min-lr min-offloaded-tensor-size mlp-chunks-for-prefill mock-data
    model-name model-parallel-size moe-apply-probs-on-input moe-aux-loss-coeff moe-deepep-num-sms
    moe-enable-deepep moe-enable-routing-replay moe-expert-capacity-factor moe-extended-tp moe-ffn-hidden-size
    moe-flex-dispatcher-backend moe-grouped-gemm moe-hybridep-num-sms moe-input-jitter-eps moe-latent-size
    moe-layer-freq moe-layer-recompute moe-pad-expert-input-to-capacity moe-pad-experts-for-cuda-graph-inference moe-per-layer-logging
    moe-permute-fusion moe-router-bias-update-rate moe-router-dtype moe-router-enable-expert-bias moe-router-force-biased
    moe-router-force-load-balancing moe-router-fusion moe-router-group-topk moe-router-load-balancing-type moe-router-num-groups
    moe-router-padding-for-fp8 moe-router-padding-for-quantization moe-router-pre-softmax moe-router-score-function moe-router-topk
    moe-router-topk-scaling-factor moe-shared-expert-gate moe-shared-expert-intermediate-size moe-shared-expert-overlap moe-token-dispatcher-type
    moe-token-drop-policy moe-upcycling-granularity moe-use-legacy-grouped-gemm moe-use-upcycling moe-z-loss-coeff
    mrope-section mscale mscale-all-dim mtp-loss-scaling-factor mtp-num-layers
    mtp-standalone multi-latent-attention multimodal-keys multiple-validation-sets muon-extra-scale-factor
    muon-fp32-matmul-prec muon-momentum muon-no-split-qkv muon-num-ns-steps muon-scale-mode
    muon-tp-mode muon-use-nesterov n-samples-per-eval-prompt n-samples-per-prompt nccl-all-reduce-for-prefill
    nccl-communicator-config-path no-align-grad-reduce no-align-param-gather no-async-tensor-model-parallel-allreduce no-barrier-with-level-1-timing
    no-bias-dropout-fusion no-bias-gelu-fusion no-bias-swiglu-fusion no-check-for-nan-in-loss-and-grad no-ckpt-fully-parallel-save
    no-clone-scatter-output-in-embedding no-create-attention-mask-in-dataloader no-data-sharding no-fp8-wgrad no-gradient-accumulation-fusion
    no-gradient-reduce-div-fusion no-inference-wandb-logging no-initialization no-langrl-external-server no-load-optim
    no-load-rng no-log-loss-scale-to-tensorboard no-manual-gc-eval no-masked-softmax-fusion no-mmap-bin-files
    no-offload-rollout no-offload-train no-one-logger no-overlap-p2p-communication no-persist-layer-norm
    no-pin-cpu-grads no-pin-cpu-params no-position-embedding no-rl-calculate-intra-group-similarity no-rl-inference-logprobs-is-correction
    no-rl-offload-inference-model-weights-when-idle no-rl-offload-kv-cache-during-training no-rl-partial-rollouts no-rl-remove-kv-cache-during-training no-rl-reset-cuda-graphs
    no-rl-skip-bos-token no-rl-training-cuda-graphs no-rl-use-sequence-packing no-rl-verify-model-weights-swap no-rope-freq
    no-rope-fusion no-save-optim no-save-rng no-scatter-gather-tensors-in-pipeline no-sglang-experts-shared-outer-loras
    no-sglang-lora-strict-loading no-strict-fsdp-dtensor-load no-tp-comm-bulk-dgrad no-tp-comm-bulk-wgrad no-tp-comm-overlap-ag
    no-tp-comm-overlap-rs no-tp-comm-split-ag no-tp-comm-split-rs no-use-tokenizer-model-from-checkpoint-args no-weight-decay-cond-type
    non-persistent-ckpt-type non-persistent-global-ckpt-dir non-persistent-local-ckpt-algo non-persistent-local-ckpt-dir non-persistent-save-interval
    norm-epsilon normalization normalize-advantages num-attention-heads num-channels
    num-classes num-critic-only-steps num-dataset-builder-threads num-distributed-optimizer-instances num-epoch
    num-experts num-gpus-per-node num-layers num-layers-at-end-in-bf16 num-layers-at-start-in-bf16
    num-layers-per-virtual-pipeline-stage num-query-groups num-rollout num-steps-per-rollout num-virtual-stages-per-pipeline-rank
    num-workers object-storage-cache-path offload offload-modules offload-optimizer-states
    offload-rollout offload-train one-logger-async one-logger-project one-logger-run-name
    only-train-params-name-list onnx-safe opd-kl-coef opd-teacher-ckpt-step opd-teacher-load
    opd-type openai-gelu opsm-delta optimizer optimizer-cpu-offload
    optimizer-offload-fraction outer-dp-sharding-strategy output-bert-embeddings over-sampling-batch-size overlap-cpu-optimizer-d2h-h2d
    overlap-grad-reduce overlap-moe-expert-parallel-comm overlap-p2p-communication-warmup-flush overlap-param-gather overlap-param-gather-with-optimizer-step
    override-opt-param-scheduler override-opt_param-scheduler padded-vocab-size partial-rollout patch-dim
    per-dataset-sequences-path per-split-data-args-path perform-rl-step persistent-save-interval phase-transition-iterations
    pipeline-model-parallel-comm-backend pipeline-model-parallel-layout pipeline-model-parallel-size position-embedding-type prefill-num-servers
    pretrained-checkpoint profile profile-ranks profile-step-end profile-step-start
    profile-target prompt-data q-lora-rank qk-clip qk-clip-alpha
    qk-clip-threshold qk-head-dim qk-l2-norm qk-layernorm qk-pos-emb-head-dim
    query-in-block-prob quick-geglu qwen-gdn-backend rampup-batch-size recompute-activations
    recompute-granularity recompute-loss-function recompute-method recompute-modules recompute-num-layers
    record-memory-history ref-ckpt-step ref-load ref-update-interval refit-method
    relative-attention-max-distance relative-attention-num-buckets release-train replication replication-factor
    replication-jump rerun-mode reset-attention-mask reset-optimizer-states reset-position-ids
    result-rejected-tracker-filename retriever-report-topk-accuracies retriever-score-scaling reuse-grad-buf-for-mxfp8-param-ag reward-key
    rl-calculate-intra-group-similarity rl-default-temperature rl-default-top-k rl-default-top-p rl-importance-sampling-truncation-coef
    rl-inference-expert-model-parallel-size rl-inference-expert-tensor-model-parallel-size rl-inference-logprobs-is-correction rl-inference-model-unified-memory-level rl-inference-pipeline-model-parallel-size
    rl-inference-tensor-model-parallel-size rl-offload-inference-model-weights-when-idle rl-offload-kv-cache-during-training rl-offload-optimizer-during-inference rl-parallel-generation-tasks
    rl-partial-rollouts rl-prompts-per-eval rl-remove-kv-cache-during-training rl-reset-cuda-graphs rl-sequence-packing-algo
    rl-sequence-packing-max-sequences-per-bin rl-skip-bos-token rl-training-cuda-graphs rl-use-sequence-packing rl-verify-model-weights-swap
    rm-type rm-url rollout-all-samples-process-path rollout-batch-size rollout-buffer-url
    rollout-data-postprocess-path rollout-data-transport rollout-external-engine-addrs rollout-function-path rollout-health-check-first-wait
    rollout-health-check-interval rollout-health-check-timeout rollout-max-context-len rollout-max-prompt-len rollout-max-response-len
    rollout-num-gpus rollout-num-gpus-per-engine rollout-sample-filter-path rollout-sample-hook-path rollout-seed
    rollout-shuffle rollout-skip-special-tokens rollout-stop rollout-stop-token-ids rollout-task-type
    rollout-temperature rollout-top-k rollout-top-p rope-scaling-factor rope-type
    rotary-base rotary-interleaved rotary-percent rotary-scaling-factor rotary-seq-len-interpolation-factor
    router-api-key router-assignment-mode router-backend router-balance-abs-threshold router-balance-rel-threshold
    router-bucket-adjust-interval-secs router-ca-cert-paths router-cache-threshold router-cb-failure-threshold router-cb-success-threshold
    router-cb-timeout-duration-secs router-cb-window-duration-secs router-chat-template router-client-cert-path router-client-key-path
    router-control-plane-api-keys router-control-plane-audit-enabled router-cors-allowed-origins router-decode router-decode-policy
    router-decode-selector router-disable-circuit-breaker router-disable-health-check router-disable-retries router-dp-aware
    router-enable-igw router-enable-trace router-eviction-interval-secs router-health-check-endpoint router-health-check-interval-secs
    router-health-check-timeout-secs router-health-failure-threshold router-health-success-threshold router-history-backend router-jwt-audience
    router-jwt-issuer router-jwt-jwks-uri router-jwt-role-mapping router-log-dir router-log-level
    router-max-concurrent-requests router-max-idle-secs router-max-payload-size router-max-tree-size router-mcp-config-path
    router-mini-lb router-model-path router-oracle-connect-descriptor router-oracle-password router-oracle-pool-max
    router-oracle-pool-min router-oracle-pool-timeout-secs router-oracle-tns-alias router-oracle-username router-oracle-wallet-path
    router-otlp-traces-endpoint router-pd-disaggregation router-policy router-postgres-db-url router-postgres-pool-max
    router-prefill router-prefill-policy router-prefill-selector router-prometheus-duration-buckets router-prometheus-host
    router-prometheus-port router-queue-size router-queue-timeout-secs router-rate-limit-tokens-per-second router-reasoning-parser
    router-redis-pool-max router-redis-retention-days router-redis-url router-request-id-headers router-request-timeout-secs
    router-retry-backoff-multiplier router-retry-initial-backoff-ms router-retry-jitter-factor router-retry-max-backoff-ms router-retry-max-retries
    router-selector router-service-discovery router-service-discovery-namespace router-service-discovery-port router-shutdown-grace-period-secs
    router-tls-cert-path router-tls-key-path router-tokenizer-cache-enable-l0 router-tokenizer-cache-enable-l1 router-tokenizer-cache-l0-max-entries
    router-tokenizer-cache-l1-max-memory router-tokenizer-path router-tool-call-parser router-worker-startup-check-interval router-worker-startup-timeout-secs
    run-workload-inspector-server sample-rate save save-debug-rollout-data save-debug-train-data
    save-dgrads-interval save-hf save-interval save-retain-interval save-wgrads-interval
    seed seq-length sequence-parallel sft sft-tokenizer-prompt-format
    sgd-momentum sglang-abort-on-priority-when-disabled sglang-admin-api-key sglang-allow-auto-truncate sglang-api-key
    sglang-asr-max-buffer-seconds sglang-asr-max-concurrent-sessions sglang-attention-backend sglang-attention-context-parallel-size sglang-attn-cp-size
    sglang-batch-notify-size sglang-bf16-gemm-backend sglang-bucket-e2e-request-latency sglang-bucket-inter-token-latency sglang-bucket-time-to-first-token
    sglang-chat-template sglang-checkpoint-engine-wait-weights-before-ready sglang-chunked-prefill-size sglang-collect-tokens-histogram sglang-completion-template
    sglang-config sglang-constrained-json-disable-any-whitespace sglang-constrained-json-whitespace-pattern sglang-context-length sglang-cp-strategy
    sglang-cpu-offload-gb sglang-crash-dump-folder sglang-cuda-graph-backend-decode sglang-cuda-graph-backend-prefill sglang-cuda-graph-bs
    sglang-cuda-graph-bs-decode sglang-cuda-graph-bs-prefill sglang-cuda-graph-config sglang-cuda-graph-max-bs sglang-cuda-graph-max-bs-decode
    sglang-cuda-graph-max-bs-prefill sglang-cuda-graph-tc-compiler sglang-custom-weight-loader sglang-data-parallel-size sglang-dcp-size
    sglang-debug-cuda-graph sglang-debug-tensor-dump-input-file sglang-debug-tensor-dump-layers sglang-debug-tensor-dump-output-folder sglang-decode-attention-backend
    sglang-decode-context-parallel-size sglang-decode-log-interval sglang-decoupled-spec-bind-endpoint sglang-decoupled-spec-connect-endpoints sglang-decoupled-spec-rank
    sglang-decoupled-spec-role sglang-decrypted-config-file sglang-decrypted-draft-config-file sglang-deepep-config sglang-deepep-dispatcher-output-dtype
    sglang-deepep-mode sglang-default-priority-value sglang-delete-ckpt-after-loading sglang-detokenizer-worker-num sglang-device
    sglang-disable-attn-tp-gather sglang-disable-chunked-prefix-cache sglang-disable-cuda-graph sglang-disable-cuda-graph-padding sglang-disable-custom-all-reduce
    sglang-disable-decode-cuda-graph sglang-disable-fast-image-processor sglang-disable-flashinfer-autotune sglang-disable-flashinfer-cutlass-moe-fp4-allgather sglang-disable-hybrid-swa-memory
    sglang-disable-outlines-disk-cache sglang-disable-overlap-schedule sglang-disable-piecewise-cuda-graph sglang-disable-prefill-cuda-graph sglang-disable-priority-preemption
    sglang-disable-radix-cache sglang-disable-shared-experts-fusion sglang-disable-tokenizer-batch-decode sglang-disaggregation-bootstrap-port sglang-disaggregation-decode-enable-offload-kvcache
    sglang-disaggregation-decode-enable-radix-cache sglang-disaggregation-decode-extra-slots sglang-disaggregation-decode-polling-interval sglang-disaggregation-ib-device sglang-disaggregation-mode
    sglang-disaggregation-transfer-backend sglang-dist-timeout sglang-dllm-algorithm sglang-dllm-algorithm-config sglang-download-dir
    sglang-dp-size sglang-dsa-decode-backend sglang-dsa-paged-mqa-logits-backend sglang-dsa-prefill-backend sglang-dsa-prefill-cp-mode
    sglang-dsa-topk-backend sglang-dtype sglang-dynamic-batch-tokenizer-batch-size sglang-dynamic-batch-tokenizer-batch-timeout sglang-elastic-ep-backend
    sglang-elastic-ep-rejoin sglang-enable-adaptive-dispatch-to-encoder sglang-enable-aiter-allreduce-fusion sglang-enable-attn-tp-input-scattered sglang-enable-breakable-cuda-graph
    sglang-enable-broadcast-mm-inputs-process sglang-enable-cache-report sglang-enable-cudagraph-gc sglang-enable-custom-logit-processor sglang-enable-deepep-waterfill
    sglang-enable-deepseek-v4-fp4-indexer sglang-enable-deterministic-inference sglang-enable-dp-attention sglang-enable-dp-attention-local-control-broadcast sglang-enable-dp-lm-head
    sglang-enable-draft-weights-cpu-backup sglang-enable-dsa-prefill-context-parallel sglang-enable-dynamic-batch-tokenizer sglang-enable-dynamic-chunking sglang-enable-elastic-expert-backup
    sglang-enable-eplb sglang-enable-expert-distribution-metrics sglang-enable-flashinfer-allreduce-fusion sglang-enable-forward-pass-metrics sglang-enable-fp32-lm-head
    sglang-enable-fused-moe-sum-all-reduce sglang-enable-fused-qk-norm-rope sglang-enable-hierarchical-cache sglang-enable-hisparse sglang-enable-http2
    sglang-enable-int8-mamba-checkpoint sglang-enable-layerwise-nvtx-marker sglang-enable-linear-replayssm sglang-enable-lmcache sglang-enable-lora
    sglang-enable-lora-overlap-loading sglang-enable-mamba-cache-stochastic-rounding sglang-enable-metrics sglang-enable-metrics-for-all-schedulers sglang-enable-mfu-metrics
    sglang-enable-mis sglang-enable-mixed-chunk sglang-enable-mm-global-cache sglang-enable-mscclpp sglang-enable-multi-layer-eagle
    sglang-enable-multimodal sglang-enable-nccl-nvls sglang-enable-nsa-prefill-context-parallel sglang-enable-p2p-check sglang-enable-page-major-kv-layout
    sglang-enable-pdmux sglang-enable-precise-embedding-interpolation sglang-enable-prefill-context-parallel sglang-enable-prefill-cp sglang-enable-prefill-delayer
    sglang-enable-prefix-mm-cache sglang-enable-priority-scheduling sglang-enable-profile-cuda-graph sglang-enable-quant-communications sglang-enable-request-time-stats-logging
    sglang-enable-return-hidden-states sglang-enable-return-indexer-topk sglang-enable-session-radix-cache sglang-enable-single-batch-overlap sglang-enable-ssl-refresh
    sglang-enable-streaming-session sglang-enable-strict-thinking sglang-enable-symm-mem sglang-enable-tf32-matmul sglang-enable-tokenizer-batch-encode
    sglang-enable-torch-compile sglang-enable-torch-compile-debug-mode sglang-enable-torch-symm-mem sglang-enable-trace sglang-enable-two-batch-overlap
    sglang-enable-unified-memory sglang-enable-weights-cpu-backup sglang-encoder-bootstrap-port sglang-encoder-only sglang-encoder-register-urls
    sglang-encoder-transfer-backend sglang-encoder-urls sglang-enforce-disable-flashinfer-allreduce-fusion sglang-enforce-piecewise-cuda-graph sglang-enforce-shared-experts-fusion
    sglang-engine-info-bootstrap-port sglang-ep sglang-ep-dispatch-algorithm sglang-ep-num-redundant-experts sglang-ep-size
    sglang-eplb-algorithm sglang-eplb-min-rebalancing-utilization-threshold sglang-eplb-rebalance-layers-per-chunk sglang-eplb-rebalance-num-iterations sglang-expert-distribution-recorder-buffer-size
    sglang-expert-distribution-recorder-mode sglang-expert-parallel-size sglang-experts-shared-outer-loras sglang-export-metrics-to-file sglang-export-metrics-to-file-dir
    sglang-extra-metric-labels sglang-fastapi-root-path sglang-file-storage-path sglang-flashinfer-allreduce-fusion-backend sglang-flashinfer-mla-disable-ragged
    sglang-flashinfer-mxfp4-moe-precision sglang-forward-hooks sglang-forward-pass-metrics-ipc-name sglang-forward-pass-metrics-worker-id sglang-fp4-gemm-backend
    sglang-fp8-gemm-backend sglang-gc-threshold sglang-gc-warning-threshold-secs sglang-generation-tokens-buckets sglang-grammar-backend
    sglang-grpc-http-sidecar-port sglang-grpc-mode sglang-hf-chat-template-name sglang-hicache-io-backend sglang-hicache-mem-layout
    sglang-hicache-ratio sglang-hicache-size sglang-hicache-storage-backend sglang-hicache-storage-backend-extra-config sglang-hicache-storage-prefetch-policy
    sglang-hicache-write-policy sglang-hierarchical-sparse-attention-extra-config sglang-hisparse-config sglang-host sglang-incremental-streaming-output
    sglang-init-expert-location sglang-int8-mamba-ckpt-size sglang-is-embedding sglang-json-model-override-args sglang-keep-mm-feature-on-device
    sglang-kt-cpuinfer sglang-kt-max-deferred-experts-per-token sglang-kt-method sglang-kt-num-gpu-experts sglang-kt-threadpool-count
    sglang-kt-weight-path sglang-kv-cache-dtype sglang-kv-canary sglang-kv-canary-real-data sglang-kv-canary-sweep-interval
    sglang-kv-events-config sglang-language-only sglang-limit-mm-data-per-request sglang-linear-attn-backend sglang-linear-attn-decode-backend
    sglang-linear-attn-prefill-backend sglang-linear-replayssm-cache-len sglang-lmcache-config-file sglang-load-balance-method sglang-load-format
    sglang-load-snapshot-publish-interval sglang-log-level sglang-log-level-http sglang-log-requests sglang-log-requests-format
    sglang-log-requests-level sglang-log-requests-target sglang-lora-backend sglang-lora-drain-wait-threshold sglang-lora-eviction-policy
    sglang-lora-paths sglang-lora-strict-loading sglang-lora-target-modules sglang-lora-use-virtual-experts sglang-mamba-backend
    sglang-mamba-cache-philox-rounds sglang-mamba-full-memory-ratio sglang-mamba-radix-cache-strategy sglang-mamba-scheduler-strategy sglang-mamba-ssm-dtype
    sglang-mamba-track-interval sglang-max-loaded-loras sglang-max-lora-chunk-size sglang-max-lora-rank sglang-max-loras-per-batch
    sglang-max-mamba-cache-size sglang-max-prefill-tokens sglang-max-queued-requests sglang-max-running-requests sglang-max-total-tokens
    sglang-mem-fraction-static sglang-min-free-slots-delay sglang-mm-attention-backend sglang-mm-enable-dp-encoder sglang-mm-process-config
    sglang-model-checksum sglang-model-config-parser sglang-model-impl sglang-model-loader-extra-config sglang-modelexpress-config
    sglang-modelopt-checkpoint-restore-path sglang-modelopt-checkpoint-save-path sglang-modelopt-export-path sglang-modelopt-quant sglang-moe-a2a-backend
    sglang-moe-data-parallel-size sglang-moe-dense-tp-size sglang-moe-dp-size sglang-moe-runner-backend sglang-mooncake-ib-device
    sglang-msprobe-dump-config sglang-nsa-decode-backend sglang-nsa-prefill-backend sglang-nsa-prefill-cp-mode sglang-num-continuous-decode-steps
    sglang-num-reserved-decode-tokens sglang-numa-node sglang-offload-group-size sglang-offload-mode sglang-offload-num-in-group
    sglang-offload-prefetch-step sglang-optimistic-prefill-retries sglang-otlp-traces-endpoint sglang-page-size sglang-pdmux-config-path
    sglang-piecewise-cuda-graph-compiler sglang-piecewise-cuda-graph-max-tokens sglang-piecewise-cuda-graph-tokens sglang-pipeline-parallel-size sglang-pp-async-batch-depth
    sglang-pp-max-micro-batch-size sglang-pp-size sglang-pre-warm-nccl sglang-preferred-sampling-params sglang-prefill-attention-backend
    sglang-prefill-cp-mode sglang-prefill-delayer-forward-passes-buckets sglang-prefill-delayer-max-delay-ms sglang-prefill-delayer-max-delay-passes sglang-prefill-delayer-queue-min-ratio
    sglang-prefill-delayer-token-usage-low-watermark sglang-prefill-delayer-wait-seconds-buckets sglang-prefill-max-requests sglang-prefill-only-disable-kv-cache sglang-prefill-round-robin-balance
    sglang-priority-scheduling-preemption-threshold sglang-prompt-tokens-buckets sglang-quantization sglang-quantization-param-path sglang-quantize-and-serve
    sglang-radix-cache-backend sglang-radix-eviction-policy sglang-reasoning-parser sglang-remote-instance-weight-loader-backend sglang-remote-instance-weight-loader-seed-instance-ip
    sglang-remote-instance-weight-loader-seed-instance-service-port sglang-remote-instance-weight-loader-send-weights-group-ports sglang-remote-instance-weight-loader-start-seed-via-transfer-engine sglang-revision sglang-rl-on-policy-target
    sglang-rl-quant-profile sglang-router-ip sglang-router-port sglang-router-request-timeout-secs sglang-sampling-backend
    sglang-sampling-defaults sglang-schedule-conservativeness sglang-schedule-low-priority-values-first sglang-schedule-policy sglang-scheduler-recv-interval
    sglang-served-model-name sglang-server-concurrency sglang-show-time-cost sglang-skip-tokenizer-init sglang-sleep-on-idle
    sglang-sm-group-num sglang-soft-watchdog-timeout sglang-spec-trace-dir sglang-speculative-accept-threshold-acc sglang-speculative-accept-threshold-single
    sglang-speculative-adaptive sglang-speculative-adaptive-config sglang-speculative-algorithm sglang-speculative-attention-mode sglang-speculative-dflash-block-size
    sglang-speculative-dflash-draft-window-size sglang-speculative-draft-attention-backend sglang-speculative-draft-load-format sglang-speculative-draft-model sglang-speculative-draft-model-path
    sglang-speculative-draft-model-quantization sglang-speculative-draft-model-revision sglang-speculative-draft-window-size sglang-speculative-eagle-topk sglang-speculative-moe-a2a-backend
    sglang-speculative-moe-runner-backend sglang-speculative-ngram-capacity sglang-speculative-ngram-external-corpus-max-tokens sglang-speculative-ngram-external-corpus-path sglang-speculative-ngram-external-sam-budget
    sglang-speculative-ngram-match-type sglang-speculative-ngram-max-bfs-breadth sglang-speculative-ngram-max-trie-depth sglang-speculative-ngram-min-bfs-breadth sglang-speculative-num-draft-tokens
    sglang-speculative-num-steps sglang-speculative-skip-dp-mlp-sync sglang-speculative-token-map sglang-speculative-use-rejection-sampling sglang-ssl-ca-certs
    sglang-ssl-certfile sglang-ssl-keyfile sglang-ssl-keyfile-password sglang-stream-interval sglang-stream-output
    sglang-stream-response-default-include-usage sglang-strip-thinking-cache sglang-swa-full-tokens-ratio sglang-tbo-token-distribution-threshold sglang-tokenizer-backend
    sglang-tokenizer-metrics-allowed-custom-labels sglang-tokenizer-metrics-custom-labels-header sglang-tokenizer-mode sglang-tokenizer-path sglang-tokenizer-worker-num
    sglang-tool-call-parser sglang-tool-server sglang-torch-compile-max-bs sglang-torchao-config sglang-trace-modules
    sglang-triton-attention-num-kv-splits sglang-triton-attention-reduce-in-fp32 sglang-triton-attention-split-tile-size sglang-use-ray sglang-uvicorn-access-log-exclude-prefixes
    sglang-warmups sglang-watchdog-timeout sglang-weight-loader-disable-mmap sglang-weight-loader-drop-cache-after-load sglang-weight-loader-prefetch-checkpoints
    sglang-weight-loader-prefetch-num-threads sglang-weight-version sharp-enabled-group short-seq-prob skip-eval-before-train
    skip-train softmax-type spec split squared-relu
    start-rollout-id start-weight-decay straggler-ctrlr-port straggler-minmax-count suggested-communication-unit-size
    swiglu swin-backbone-type symmetric-ar-type tb-experiment-name tb-project-name
    te-precision-config-file te-rng-tracker tensor-model-parallel-size tensorboard-dir tensorboard-log-interval
    tensorboard-queue-size test-data-path test-mode tiktoken-num-special-tokens tiktoken-pattern
    tiktoken-special-tokens timing-log-level timing-log-option tis-clip tis-clip-low
    titles-data-path tokenizer-hf-include-special-tokens tokenizer-hf-use-fast tokenizer-metadata tokenizer-model
    tokenizer-sentencepiece-legacy tokenizer-special-tokens tokenizer-type tool-key torch-fsdp2-no-reshard-after-forward
    tp-comm-bootstrap-backend tp-comm-overlap tp-comm-overlap-cfg tp-comm-overlap-rs-dgrad train-backend
    train-data-path train-env-vars train-iters train-samples train-sync-interval
    transformer-impl trust-remote-code untie-embeddings-and-output-weights update-weight-buffer-size update-weight-delta-checksum
    update-weight-delta-encoding update-weight-disk-dir update-weight-disk-keep-files update-weight-local-checkpoint-dir update-weight-mode
    update-weight-transport update-weights-interval use-checkpoint-args use-checkpoint-opt-param-scheduler use-checkpoint-opt_param-scheduler
    use-cpu-initialization use-dist-ckpt use-distributed-optimizer use-distributed-post use-dynamic-batch-size
    use-fault-tolerance use-flash-attn use-fused-weighted-squared-relu use-kitchen-attention use-kl-loss
    use-legacy-models use-legacy-static-engine use-mcore-models use-megatron-fsdp use-mp-args-from-checkpoint-args
    use-nccl-ub use-one-sent-docs use-opd use-opsm use-persistent-ckpt-worker
    use-precision-aware-optimizer use-pytorch-profiler use-ring-exchange-p2p use-rollout-entropy use-rollout-logprobs
    use-rollout-routing-replay use-rope-scaling use-rotary-position-embeddings use-routing-replay use-sharp
    use-stateless-adam use-te-activation-func use-tensorboard use-tis use-torch-fsdp2
    use-torch-optimizer-for-cpu-offload use-tp-pp-dp-mapping use-unbiased-kl use-wandb v-head-dim
    valid-data-path value-clip vision-backbone-type vision-pretraining vision-pretraining-type
    vocab-extra-ids vocab-file vocab-size wandb-always-use-train-step wandb-dir
    wandb-entity wandb-exp-name wandb-group wandb-host wandb-key
    wandb-mode wandb-project wandb-run-id wandb-save-dir wandb-team
    warmup weight-decay weight-decay-incr-style wgrad-deferral-limit window-attn-skip-freq
    window-size worker-urls yaml-cfg
""".split())
"""Every ``--flag`` slime's parser (Megatron's and SGLang's included) defines, as kept in the project."""

SGLANG_PREFIX = "--sglang-"


def slime_parser_flags() -> frozenset[str] | None:
    """The flags of slime's own parser in this interpreter, or None when slime cannot be imported.

    slime builds its parser inside ``parse_args`` (Megatron's groups, its own, SGLang's), so this runs
    that with a rollout-only command line and reads every parser's flags as it parses; the run stops
    where slime reports a missing required flag.
    """
    try:
        from slime.utils import arguments
    except Exception:  # noqa: BLE001 - not the training image (or a broken one): use the kept list
        return None
    seen: set[str] = set()
    original = argparse.ArgumentParser.parse_known_args

    def reading(self, args=None, namespace=None):  # type: ignore[no-untyped-def]
        seen.update(flag for flag in self._option_string_actions if flag.startswith("--"))
        return original(self, args, namespace)

    argv, sys.argv = sys.argv, ["train.py", "--debug-rollout-only"]
    argparse.ArgumentParser.parse_known_args = reading  # type: ignore[method-assign]
    try:
        with contextlib.redirect_stderr(io.StringIO()), contextlib.redirect_stdout(io.StringIO()):
            arguments.parse_args()
    except BaseException:  # noqa: BLE001 - slime exits on the flags this command line lacks
        pass
    finally:
        argparse.ArgumentParser.parse_known_args = original  # type: ignore[method-assign]
        sys.argv = argv
    return frozenset(seen) or None


def is_slime_flag(flag: str, known: Collection[str] = SLIME_FLAGS) -> bool:
    """Whether slime's parser accepts ``flag`` (``--name``, without ``=value``)."""
    return flag in known or flag.startswith(SGLANG_PREFIX)


def closest_slime_flag(flag: str, known: Collection[str] = SLIME_FLAGS) -> str | None:
    """The known flag nearest to ``flag``, or None when none is close."""
    near = difflib.get_close_matches(flag, known, n=1, cutoff=0.8)
    return near[0] if near else None
