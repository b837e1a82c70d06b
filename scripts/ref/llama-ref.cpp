// Reference outputs of llama.cpp for rayo-llm's correctness tests. Built and run by
// scripts/ref/llm-refs.sh (g++ against llama.cpp's include/llama.h and build/bin/libllama.so).
//
// Modes:
//   greedy MODEL N PROMPT          prompt ids, N greedy tokens (stop at EOG) and their text, as
//                                  llama-simple does it (add_special and parse_special true, the
//                                  prompt in one batch, then one token per decode)
//   greedy-file MODEL N PROMPTS    the same for every line of PROMPTS (escaped, see below), in
//                                  the line format of crates/rayo-llm/tests/data/greedy-*.txt
//   tokenize MODEL TEXT_FILE       the ids of the file's text (add_special, parse_special)
//   pieces MODEL TEXT              the pieces of TEXT's ids (add_special, parse_special; special
//                                  tokens rendered), escaped: with TEXT "" the tokens the vocab
//                                  adds (Gemma's <bos>), which llama-simple prints before a prompt
//   forced MODEL IDS_FILE OUT      the ids evaluated teacher-forced in one batch with logits at
//                                  every position; per position llama.cpp's top-1 and top-32
//                                  (id, log-softmax) on stdout, all logits (f32, positions x vocab,
//                                  little endian) into OUT
//   config                         the context settings used (for the files' headers)
//
// Escapes (prompts and text): \\ \n \r \t, and \xHH for other control bytes and for bytes that
// are not valid UTF-8 (a generation may stop inside a character).
#include "llama.h"

#include <algorithm>
#include <clocale>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

static std::string g_fa_log;

static void log_cb(ggml_log_level level, const char * text, void *) {
    // Keep llama.cpp quiet except errors; remember how flash attention was resolved.
    if (strstr(text, "flash_attn") || strstr(text, "Flash Attention")) g_fa_log += text;
    if (level == GGML_LOG_LEVEL_ERROR || getenv("RAYO_REF_VERBOSE")) fputs(text, stderr);
}

static int n_threads() {
    const char * t = getenv("RAYO_REF_THREADS");
    return t ? atoi(t) : 2;
}

// Same as llama-simple except the thread count (results do not depend on it on the CPU).
// RAYO_REF_FLASH_ATTN=0|1 overrides llama-simple's 'auto' (which the CPU resolves to enabled;
// its path rounds Q to f16 for the K dot products) when a difference needs chasing.
static llama_context_params ctx_params(int n_ctx, int n_batch) {
    llama_context_params p = llama_context_default_params();
    if (const char * fa = getenv("RAYO_REF_FLASH_ATTN"))
        p.flash_attn_type = atoi(fa) ? LLAMA_FLASH_ATTN_TYPE_ENABLED : LLAMA_FLASH_ATTN_TYPE_DISABLED;
    // RAYO_REF_KV=f32: an f32 KV cache instead of the default f16.
    if (const char * kv = getenv("RAYO_REF_KV"); kv && !strcmp(kv, "f32")) p.type_k = p.type_v = GGML_TYPE_F32;
    p.n_ctx = n_ctx;
    p.n_batch = n_batch;
    p.n_ubatch = n_batch;
    p.n_threads = n_threads();
    p.n_threads_batch = n_threads();
    return p;
}

static bool utf8_len(const std::string & s, size_t i, size_t & n) {
    const unsigned char c = s[i];
    n = c < 0x80 ? 1 : (c >> 5) == 6 ? 2 : (c >> 4) == 14 ? 3 : (c >> 3) == 30 ? 4 : 0;
    if (n == 0 || i + n > s.size()) return false;
    for (size_t k = 1; k < n; k++)
        if ((static_cast<unsigned char>(s[i + k]) >> 6) != 2) return false;
    return true;
}

static std::string escape(const std::string & s) {
    std::string out;
    char buf[8];
    for (size_t i = 0; i < s.size();) {
        const unsigned char c = s[i];
        size_t n = 1;
        if (c == '\\') out += "\\\\";
        else if (c == '\n') out += "\\n";
        else if (c == '\r') out += "\\r";
        else if (c == '\t') out += "\\t";
        else if (c < 0x20 || c == 0x7f || (c >= 0x80 && !utf8_len(s, i, n))) {
            snprintf(buf, sizeof buf, "\\x%02x", c);
            out += buf;
            n = 1;
        } else out.append(s, i, n);
        i += n;
    }
    return out;
}

static std::string unescape(const std::string & s) {
    std::string out;
    for (size_t i = 0; i < s.size(); i++) {
        if (s[i] != '\\' || i + 1 >= s.size()) { out += s[i]; continue; }
        const char c = s[++i];
        if (c == 'n') out += '\n';
        else if (c == 'r') out += '\r';
        else if (c == 't') out += '\t';
        else if (c == 'x' && i + 2 < s.size()) { out += static_cast<char>(strtol(s.substr(i + 1, 2).c_str(), nullptr, 16)); i += 2; }
        else out += c;
    }
    return out;
}

static std::vector<llama_token> tokenize(const llama_vocab * vocab, const std::string & text) {
    const int n = -llama_tokenize(vocab, text.data(), text.size(), nullptr, 0, true, true);
    std::vector<llama_token> ids(n);
    if (llama_tokenize(vocab, text.data(), text.size(), ids.data(), ids.size(), true, true) < 0) {
        fprintf(stderr, "tokenize failed\n");
        exit(1);
    }
    return ids;
}

static std::string piece(const llama_vocab * vocab, llama_token id) {
    char buf[256];
    const int n = llama_token_to_piece(vocab, id, buf, sizeof buf, 0, true);
    if (n < 0) { fprintf(stderr, "token_to_piece failed for %d\n", id); exit(1); }
    return std::string(buf, n);
}

static void fill(llama_batch_ext * b, const llama_token * ids, int n, llama_pos pos0, bool all_logits) {
    llama_batch_ext_clear(b);
    for (int i = 0; i < n; i++) {
        const int idx = llama_batch_ext_add_token(b, 0, ids[i]);
        if (idx < 0) { fprintf(stderr, "batch full at %d\n", i); exit(1); }
        const llama_pos pos = pos0 + i;
        llama_batch_ext_set_pos(b, idx, &pos);
        if (all_logits) llama_batch_ext_set_output_logits(b, idx, true);
    }
    if (!all_logits) llama_batch_ext_set_output_logits(b, n - 1, true);
}

static llama_token argmax(const float * x, int n) {
    int best = 0;
    for (int i = 1; i < n; i++) if (x[i] > x[best]) best = i;
    return best;
}

struct Greedy { std::vector<llama_token> prompt, gen; std::vector<float> gap; llama_token eog = -1; std::string text; };

// The margin of the largest logit over the second largest (a small one marks a near tie).
static float top2_gap(const float * x, int n) {
    float a = -INFINITY, b = -INFINITY;
    for (int i = 0; i < n; i++) {
        if (x[i] > a) { b = a; a = x[i]; } else if (x[i] > b) b = x[i];
    }
    return a - b;
}

static Greedy greedy(llama_model * model, const std::string & prompt, int n_predict) {
    const llama_vocab * vocab = llama_model_get_vocab(model);
    Greedy g;
    g.prompt = tokenize(vocab, prompt);
    const int np = g.prompt.size();
    llama_context * ctx = llama_init_from_model(model, ctx_params(np + n_predict, np));
    if (!ctx) { fprintf(stderr, "context failed\n"); exit(1); }
    llama_batch_ext * b = llama_batch_ext_init(ctx);
    fill(b, g.prompt.data(), np, 0, false);
    int pos = 0, nt = np;
    for (int k = 0; k < n_predict; k++) {
        if (llama_process(ctx, LLAMA_PROCESS_TYPE_DECODE, b)) { fprintf(stderr, "decode failed\n"); exit(1); }
        pos += nt;
        // llama-simple's greedy sampler: the first maximum of the last output's logits.
        const float * logits = llama_get_logits_ith(ctx, -1);
        const llama_token id = argmax(logits, llama_vocab_n_tokens(vocab));
        g.gap.push_back(top2_gap(logits, llama_vocab_n_tokens(vocab)));
        if (llama_vocab_is_eog(vocab, id)) { g.eog = id; break; }
        g.gen.push_back(id);
        g.text += piece(vocab, id);
        fill(b, &id, 1, pos, false);
        nt = 1;
    }
    llama_batch_ext_free(b);
    llama_free(ctx);
    return g;
}

static void print_ids(const char * tag, const std::vector<llama_token> & ids) {
    printf("%s", tag);
    for (auto id : ids) printf(" %d", id);
    printf("\n");
}

static std::string read_file(const char * path) {
    std::ifstream f(path, std::ios::binary);
    if (!f) { fprintf(stderr, "cannot read %s\n", path); exit(1); }
    std::stringstream ss;
    ss << f.rdbuf();
    return ss.str();
}

static void forced(llama_model * model, const char * ids_path, const char * out_path) {
    const llama_vocab * vocab = llama_model_get_vocab(model);
    const int nv = llama_vocab_n_tokens(vocab);
    std::vector<llama_token> ids;
    std::istringstream in(read_file(ids_path));
    for (long v; in >> v;) ids.push_back(v);
    const int n = ids.size();
    if (n == 0 || n > 512) { fprintf(stderr, "forced: %d ids (1..512 in one batch)\n", n); exit(1); }
    llama_context * ctx = llama_init_from_model(model, ctx_params(n, n));
    if (!ctx) { fprintf(stderr, "context failed\n"); exit(1); }
    llama_batch_ext * b = llama_batch_ext_init(ctx);
    fill(b, ids.data(), n, 0, true);
    if (llama_process(ctx, LLAMA_PROCESS_TYPE_DECODE, b)) { fprintf(stderr, "decode failed\n"); exit(1); }
    FILE * out = fopen(out_path, "wb");
    if (!out) { fprintf(stderr, "cannot write %s\n", out_path); exit(1); }
    std::vector<int> order(nv);
    for (int i = 0; i < n; i++) {
        const float * x = llama_get_logits_ith(ctx, i);
        fwrite(x, sizeof(float), nv, out);
        // log-softmax in double: max + log(sum exp(x - max)).
        const float mx = *std::max_element(x, x + nv);
        double s = 0;
        for (int j = 0; j < nv; j++) s += std::exp(double(x[j]) - mx);
        const double lse = mx + std::log(s);
        for (int j = 0; j < nv; j++) order[j] = j;
        // Ties keep the lower id first, as argmax does.
        std::partial_sort(order.begin(), order.begin() + 32, order.end(),
                          [&](int a, int c) { return x[a] > x[c] || (x[a] == x[c] && a < c); });
        printf("pos %d %d %d", i, ids[i], argmax(x, nv));
        for (int k = 0; k < 32; k++) printf(" %d:%.4f", order[k], double(x[order[k]]) - lse);
        printf("\n");
    }
    fclose(out);
    llama_batch_ext_free(b);
    llama_free(ctx);
}

int main(int argc, char ** argv) {
    std::setlocale(LC_NUMERIC, "C");
    llama_log_set(log_cb, nullptr);
    if (argc >= 2 && !strcmp(argv[1], "config")) {
        const auto p = ctx_params(0, 0);
        printf("threads %d, flash_attn_type %s, type_k %s, type_v %s, %s\n", p.n_threads,
               llama_flash_attn_type_name(p.flash_attn_type), ggml_type_name(p.type_k), ggml_type_name(p.type_v),
               llama_print_system_info());
        return 0;
    }
    if (argc < 4) {
        fprintf(stderr, "usage: %s greedy MODEL N PROMPT | greedy-file MODEL N PROMPTS | tokenize MODEL FILE | pieces MODEL TEXT | forced MODEL IDS OUT\n", argv[0]);
        return 2;
    }
    const std::string mode = argv[1];
    llama_backend_init();
    llama_model_params mp = llama_model_default_params();
    mp.n_gpu_layers = 0;
    llama_model * model = llama_model_load_from_file(argv[2], mp);
    if (!model) { fprintf(stderr, "cannot load %s\n", argv[2]); return 1; }
    const llama_vocab * vocab = llama_model_get_vocab(model);
    if (mode == "greedy" && argc >= 5) {
        const Greedy g = greedy(model, argv[4], atoi(argv[3]));
        print_ids("prompt_ids", g.prompt);
        print_ids("gen_ids", g.gen);
        if (g.eog >= 0) printf("eog %d\n", g.eog);
        printf("text %s\n", escape(g.text).c_str());
    } else if (mode == "greedy-file") {
        std::istringstream in(read_file(argv[4]));
        int k = 0;
        for (std::string line; std::getline(in, line);) {
            if (line.empty()) continue;
            const Greedy g = greedy(model, unescape(line), atoi(argv[3]));
            printf("prompt %d %s\n", k++, line.c_str());
            print_ids("prompt_ids", g.prompt);
            print_ids("gen_ids", g.gen);
            printf("eog %d\n", g.eog);
            printf("gap");
            for (float x : g.gap) printf(" %.4f", x);
            printf("\n");
            printf("text %s\n", escape(g.text).c_str());
        }
    } else if (mode == "pieces") {
        std::string text;
        for (auto id : tokenize(vocab, argv[3])) text += piece(vocab, id);
        printf("%s\n", escape(text).c_str());
    } else if (mode == "tokenize") {
        print_ids("ids", tokenize(vocab, read_file(argv[3])));
    } else if (mode == "forced" && argc >= 5) {
        forced(model, argv[3], argv[4]);
    } else {
        fprintf(stderr, "bad mode or arguments\n");
        return 2;
    }
    if (!g_fa_log.empty()) fprintf(stderr, "%s", g_fa_log.c_str());
    llama_model_free(model);
    return 0;
}
