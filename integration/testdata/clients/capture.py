import json, sys, os, itertools
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
counter = itertools.count()
OUT = sys.argv[2]
class H(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    def log_message(self, *a): pass
    def _send(self, status, ctype, body):
        b = body.encode()
        self.send_response(status)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(b)))
        self.end_headers()
        self.wfile.write(b)
    def do_GET(self):
        n = next(counter)
        with open(os.path.join(OUT, f"{n:03d}-GET{self.path.replace('/','_')[:60]}.json"), "w") as f:
            json.dump({"headers": dict(self.headers)}, f, indent=1)
        if self.path.startswith("/v1/responses"):  # UPGRADE426
            return self._send(426, "application/json", '{"error":{"message":"POST instead","type":"invalid_request_error"}}')
        if self.path.startswith("/v1/models"):
            return self._send(200, "application/json", json.dumps({"object":"list","data":[]}))
        self._send(404, "application/json", '{"error":{"message":"not found","type":"invalid_request_error"}}')
    def do_HEAD(self):
        self._send(200, "application/json", "")
    def do_POST(self):
        ln = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(ln)
        n = next(counter)
        path = self.path.split("?")[0]
        with open(os.path.join(OUT, f"{n:03d}-POST{path.replace('/','_')[:60]}.json"), "wb") as f:
            f.write(raw)
        with open(os.path.join(OUT, f"{n:03d}-headers.json"), "w") as f:
            json.dump(dict(self.headers), f, indent=1)
        try:
            body = json.loads(raw or b"{}")
        except Exception:
            body = {}
        if path.endswith("/count_tokens"):
            return self._send(200, "application/json", '{"input_tokens": 10}')
        if path.endswith("/v1/messages"):
            model = body.get("model", "m")
            if not body.get("stream"):
                return self._send(200, "application/json", json.dumps({"id":"msg_1","type":"message","role":"assistant","model":model,"content":[{"type":"text","text":"ok"}],"stop_reason":"end_turn","stop_sequence":None,"usage":{"input_tokens":10,"output_tokens":1}}))
            evs = [("message_start",{"type":"message_start","message":{"id":"msg_1","type":"message","role":"assistant","model":model,"content":[],"stop_reason":None,"stop_sequence":None,"usage":{"input_tokens":10,"output_tokens":1}}}),
                   ("content_block_start",{"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}}),
                   ("content_block_delta",{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"ok"}}),
                   ("content_block_stop",{"type":"content_block_stop","index":0}),
                   ("message_delta",{"type":"message_delta","delta":{"stop_reason":"end_turn","stop_sequence":None},"usage":{"output_tokens":1}}),
                   ("message_stop",{"type":"message_stop"})]
            return self._send(200, "text/event-stream", "".join(f"event: {e}\ndata: {json.dumps(d)}\n\n" for e,d in evs))
        if path.endswith("/chat/completions"):
            model = body.get("model","m")
            usage = {"prompt_tokens":10,"completion_tokens":1,"total_tokens":11}
            if not body.get("stream"):
                return self._send(200, "application/json", json.dumps({"id":"chatcmpl-1","object":"chat.completion","created":1,"model":model,"choices":[{"index":0,"message":{"role":"assistant","content":"ok"},"finish_reason":"stop","logprobs":None}],"usage":usage}))
            chunks = [{"id":"chatcmpl-1","object":"chat.completion.chunk","created":1,"model":model,"choices":[{"index":0,"delta":{"role":"assistant","content":"ok"},"finish_reason":None}]},
                      {"id":"chatcmpl-1","object":"chat.completion.chunk","created":1,"model":model,"choices":[{"index":0,"delta":{},"finish_reason":"stop"}]},
                      {"id":"chatcmpl-1","object":"chat.completion.chunk","created":1,"model":model,"choices":[],"usage":usage}]
            return self._send(200, "text/event-stream", "".join(f"data: {json.dumps(c)}\n\n" for c in chunks) + "data: [DONE]\n\n")
        if path.endswith("/responses"):
            model = body.get("model","m")
            msg = {"id":"msg_1","type":"message","status":"completed","role":"assistant","content":[{"type":"output_text","text":"ok","annotations":[]}]}
            inp = body.get("input") if isinstance(body.get("input"), list) else []
            if body.get("tools") and not any(isinstance(i, dict) and i.get("type") == "function_call_output" for i in inp) and not body.get("stream"):
                fc = {"id":"fc_1","type":"function_call","status":"completed","arguments":"{\"city\":\"Paris\"}","call_id":"call_1","name":"get_weather"}
                u = {"input_tokens":10,"input_tokens_details":{"cached_tokens":0},"output_tokens":1,"output_tokens_details":{"reasoning_tokens":0},"total_tokens":11}
                return self._send(200, "application/json", json.dumps({"id":"resp_1","object":"response","created_at":1,"status":"completed","model":model,"output":[fc],"usage":u,"error":None,"incomplete_details":None}))
            usage = {"input_tokens":10,"input_tokens_details":{"cached_tokens":0},"output_tokens":1,"output_tokens_details":{"reasoning_tokens":0},"total_tokens":11}
            def resp(status, out, u):
                return {"id":"resp_1","object":"response","created_at":1,"status":status,"model":model,"output":out,"usage":u,"error":None,"incomplete_details":None}
            if not body.get("stream"):
                return self._send(200, "application/json", json.dumps(resp("completed",[msg],usage)))
            evs = [("response.created",{"response":resp("in_progress",[],None)}),
                   ("response.output_item.added",{"output_index":0,"item":{**msg,"status":"in_progress","content":[]}}),
                   ("response.content_part.added",{"item_id":"msg_1","output_index":0,"content_index":0,"part":{"type":"output_text","text":"","annotations":[]}}),
                   ("response.output_text.delta",{"item_id":"msg_1","output_index":0,"content_index":0,"delta":"ok"}),
                   ("response.output_text.done",{"item_id":"msg_1","output_index":0,"content_index":0,"text":"ok"}),
                   ("response.output_item.done",{"output_index":0,"item":msg}),
                   ("response.completed",{"response":resp("completed",[msg],usage)})]
            out = ""
            for i,(e,d) in enumerate(evs):
                d = {"type":e, "sequence_number":i, **d}
                out += f"event: {e}\ndata: {json.dumps(d)}\n\n"
            return self._send(200, "text/event-stream", out)
        if ":streamGenerateContent" in path or ":generateContent" in path:
            d = {"candidates":[{"content":{"role":"model","parts":[{"text":"ok"}]},"finishReason":"STOP","index":0}],"usageMetadata":{"promptTokenCount":10,"candidatesTokenCount":1,"totalTokenCount":11},"modelVersion":"gemini-2.5-flash"}
            if "streamGenerateContent" in path:
                return self._send(200, "text/event-stream", f"data: {json.dumps(d)}\r\n\r\n")
            return self._send(200, "application/json", json.dumps(d))
        if ":countTokens" in path:
            return self._send(200, "application/json", '{"totalTokens": 10}')
        self._send(404, "application/json", '{"error":{"message":"not found","type":"invalid_request_error"}}')
ThreadingHTTPServer(("127.0.0.1", int(sys.argv[1])), H).serve_forever()
