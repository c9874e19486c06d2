// The prompt cache's routes (docs/protocol.md, "Prompt cache"):
//   GET    /api/cache        what both tiers hold and how often they served a prompt: the
//                            caller's own entries (root and the daemon's user: everyone's,
//                            with per-uid totals)
//   DELETE /api/cache        forget the caller's cached prefixes, of every model; ?model=ID
//                            (or a JSON body {"model": ID}) only the loaded model's; root and
//                            the daemon's user forget everyone's, or ?uid=N only that uid's
//   POST   /api/cache/warm   prefill a prompt ({"prompt"}) or a chat prefix ({"messages"})
//                            and persist it, generating nothing
// The handlers are declared in hearth.h: clearing comes back as an EngineCall (it waits for
// the engine thread), warming as a GenerationJob whose writer answers with counts, never
// text. Each serves the model its route resolved (route_table.h). Here: the parts tests
// and other routes reuse.
#pragma once

#include <nlohmann/json_fwd.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "engine/tokenizer/chat_template.h"
#include "ipc/api/hearth.h"

namespace hearth {
struct CacheStats;
}

namespace hearth::ipc {

// The body of GET /api/cache (and of DELETE's answer, after "cleared"), as `peer` may see
// it: an admin (is_cache_admin) gets the totals and "owners" (per uid); anyone else gets
// the entries, tokens and bytes of their own uid in place of the totals.
nlohmann::ordered_json cache_stats_json(const CacheStats& stats, const std::string& model_id, const PeerIdentity& peer,
                                        CacheScopeMode mode);

// The answer to a warm request once it is Done: 200 with {"object": "cache.warm", "model",
// "tokens", "cached_tokens": {"memory", "disk"}, "prefilled_tokens", "chunks_written",
// "finish_reason", "timings": {"queue_ms", "cache_restore_ms", "prefill_ms",
// "prefill_tok_s", "total_ms"}}, or 503 when the engine cancelled it (the daemon is
// stopping). total_ms: from submission to the prompt's end.
HttpResponse warm_response(const std::string& model_id, const ApiEvent& done);

// The segments every chat request that continues `messages` starts with: the template
// rendered for messages plus one more turn (user, or assistant after a user message), cut
// where that turn's content begins. For Gemma, a lone system message gives
// "<bos><start_of_turn>user\n{system}\n\n". Errors are the template's (roles, alternation).
std::variant<std::vector<ChatSegment>, ApiError> chat_prefix_segments(const ChatTemplate& tmpl,
                                                                      const std::vector<ChatMessage>& messages);

}  // namespace hearth::ipc
