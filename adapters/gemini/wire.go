package gemini

import (
	"bytes"
	"encoding/json"
)

// The Gemini wire shapes, as in the Gemini API reference for
// generateContent, streamGenerateContent (alt=sse), countTokens and models.
// Only what the gateway reads or writes is declared; passthrough keeps every
// other field because it forwards the client's own bytes.

type generateRequest struct {
	Model             string            `json:"model,omitempty"` // only inside countTokens' generateContentRequest
	Contents          []content         `json:"contents"`
	SystemInstruction *content          `json:"systemInstruction,omitempty"`
	Tools             []tool            `json:"tools,omitempty"`
	ToolConfig        *toolConfig       `json:"toolConfig,omitempty"`
	GenerationConfig  *generationConfig `json:"generationConfig,omitempty"`
	SafetySettings    json.RawMessage   `json:"safetySettings,omitempty"`
	CachedContent     string            `json:"cachedContent,omitempty"`
}

type content struct {
	Role  string `json:"role,omitempty"`
	Parts []part `json:"parts"`
}

type part struct {
	Text             *string           `json:"text,omitempty"`
	Thought          bool              `json:"thought,omitempty"`
	ThoughtSignature string            `json:"thoughtSignature,omitempty"` // base64
	InlineData       *blob             `json:"inlineData,omitempty"`
	FileData         *fileData         `json:"fileData,omitempty"`
	FunctionCall     *functionCall     `json:"functionCall,omitempty"`
	FunctionResponse *functionResponse `json:"functionResponse,omitempty"`
	// Other part kinds, kept only to be named in a refusal.
	ExecutableCode      json.RawMessage `json:"executableCode,omitempty"`
	CodeExecutionResult json.RawMessage `json:"codeExecutionResult,omitempty"`
	// other is set when the part has a member the gateway does not know.
	other bool
}

// partKeys are the members of a part the gateway reads.
var partKeys = map[string]bool{"text": true, "thought": true, "thoughtSignature": true, "inlineData": true, "fileData": true,
	"functionCall": true, "functionResponse": true, "executableCode": true, "codeExecutionResult": true}

func (p *part) UnmarshalJSON(b []byte) error {
	type plain part
	if err := json.Unmarshal(b, (*plain)(p)); err != nil {
		return err
	}
	if !p.empty() {
		return nil
	}
	var m map[string]json.RawMessage
	if json.Unmarshal(b, &m) == nil {
		for k := range m {
			if !partKeys[k] {
				p.other = true
			}
		}
	}
	return nil
}

// empty reports whether a part carries nothing the gateway reads, and no
// other field either.
func (p *part) empty() bool {
	return p.Text == nil && !p.Thought && p.ThoughtSignature == "" && p.InlineData == nil && p.FileData == nil &&
		p.FunctionCall == nil && p.FunctionResponse == nil && p.ExecutableCode == nil && p.CodeExecutionResult == nil && !p.other
}

type blob struct {
	MimeType string `json:"mimeType"`
	Data     string `json:"data"` // base64
}

type fileData struct {
	MimeType string `json:"mimeType,omitempty"`
	FileURI  string `json:"fileUri"`
}

type functionCall struct {
	ID   string          `json:"id,omitempty"`
	Name string          `json:"name"`
	Args json.RawMessage `json:"args,omitempty"`
}

type functionResponse struct {
	ID       string          `json:"id,omitempty"`
	Name     string          `json:"name"`
	Response json.RawMessage `json:"response"`
}

// tool is one entry of tools: function declarations, or one of Gemini's
// built-in tools (googleSearch, codeExecution, urlContext, ...), whose
// names are kept in Builtin.
type tool struct {
	FunctionDeclarations []functionDeclaration
	Builtin              []string
}

func (t *tool) UnmarshalJSON(b []byte) error {
	var m map[string]json.RawMessage
	if err := json.Unmarshal(b, &m); err != nil {
		return err
	}
	for k, v := range m {
		if k == "functionDeclarations" {
			if err := json.Unmarshal(v, &t.FunctionDeclarations); err != nil {
				return err
			}
			continue
		}
		t.Builtin = append(t.Builtin, k)
	}
	return nil
}

func (t tool) MarshalJSON() ([]byte, error) {
	return json.Marshal(struct {
		FunctionDeclarations []functionDeclaration `json:"functionDeclarations"`
	}{t.FunctionDeclarations})
}

type functionDeclaration struct {
	Name                 string          `json:"name"`
	Description          string          `json:"description,omitempty"`
	Parameters           json.RawMessage `json:"parameters,omitempty"`
	ParametersJSONSchema json.RawMessage `json:"parametersJsonSchema,omitempty"`
}

type toolConfig struct {
	FunctionCallingConfig *functionCallingConfig `json:"functionCallingConfig,omitempty"`
}

type functionCallingConfig struct {
	Mode                 string   `json:"mode,omitempty"` // AUTO, ANY, NONE, VALIDATED
	AllowedFunctionNames []string `json:"allowedFunctionNames,omitempty"`
}

type generationConfig struct {
	MaxOutputTokens    *int64          `json:"maxOutputTokens,omitempty"`
	Temperature        *float64        `json:"temperature,omitempty"`
	TopP               *float64        `json:"topP,omitempty"`
	TopK               *float64        `json:"topK,omitempty"`
	StopSequences      []string        `json:"stopSequences,omitempty"`
	CandidateCount     *int64          `json:"candidateCount,omitempty"`
	Seed               *int64          `json:"seed,omitempty"`
	PresencePenalty    *float64        `json:"presencePenalty,omitempty"`
	FrequencyPenalty   *float64        `json:"frequencyPenalty,omitempty"`
	ResponseMimeType   string          `json:"responseMimeType,omitempty"`
	ResponseSchema     json.RawMessage `json:"responseSchema,omitempty"`
	ResponseJSONSchema json.RawMessage `json:"responseJsonSchema,omitempty"`
	ResponseModalities []string        `json:"responseModalities,omitempty"`
	ThinkingConfig     *thinkingConfig `json:"thinkingConfig,omitempty"`
}

type thinkingConfig struct {
	IncludeThoughts bool   `json:"includeThoughts,omitempty"`
	ThinkingBudget  *int64 `json:"thinkingBudget,omitempty"`
	ThinkingLevel   string `json:"thinkingLevel,omitempty"`
}

type countTokensRequest struct {
	Contents               []content        `json:"contents,omitempty"`
	GenerateContentRequest *generateRequest `json:"generateContentRequest,omitempty"`
}

type countTokensResponse struct {
	TotalTokens int64 `json:"totalTokens"`
}

type generateResponse struct {
	Candidates     []candidate     `json:"candidates,omitempty"`
	PromptFeedback *promptFeedback `json:"promptFeedback,omitempty"`
	UsageMetadata  *usageMetadata  `json:"usageMetadata,omitempty"`
	ModelVersion   string          `json:"modelVersion,omitempty"`
	ResponseID     string          `json:"responseId,omitempty"`
}

type candidate struct {
	Content      *content `json:"content,omitempty"`
	FinishReason string   `json:"finishReason,omitempty"`
	Index        int      `json:"index"`
}

type promptFeedback struct {
	BlockReason string `json:"blockReason,omitempty"`
}

// usageMetadata counts: promptTokenCount includes cached content;
// candidatesTokenCount excludes thoughts, which are counted apart.
type usageMetadata struct {
	PromptTokenCount        int64 `json:"promptTokenCount"`
	CandidatesTokenCount    int64 `json:"candidatesTokenCount"`
	TotalTokenCount         int64 `json:"totalTokenCount"`
	CachedContentTokenCount int64 `json:"cachedContentTokenCount,omitempty"`
	ThoughtsTokenCount      int64 `json:"thoughtsTokenCount,omitempty"`
	ToolUsePromptTokenCount int64 `json:"toolUsePromptTokenCount,omitempty"`
}

type errorBody struct {
	Error *errorDetail `json:"error"`
}

type errorDetail struct {
	Code    int             `json:"code"`
	Message string          `json:"message"`
	Status  string          `json:"status"`
	Details json.RawMessage `json:"details,omitempty"`
}

type modelList struct {
	Models []modelObject `json:"models"`
}

type modelObject struct {
	Name                       string   `json:"name"`
	BaseModelID                string   `json:"baseModelId,omitempty"`
	Version                    string   `json:"version,omitempty"`
	DisplayName                string   `json:"displayName"`
	SupportedGenerationMethods []string `json:"supportedGenerationMethods"`
}

// snakeNames are the proto field names Gemini's REST API accepts beside the
// lowerCamel JSON names (Google's own curl examples use them).
var snakeNames = map[string]string{
	"system_instruction":       "systemInstruction",
	"generation_config":        "generationConfig",
	"tool_config":              "toolConfig",
	"safety_settings":          "safetySettings",
	"cached_content":           "cachedContent",
	"inline_data":              "inlineData",
	"file_data":                "fileData",
	"mime_type":                "mimeType",
	"file_uri":                 "fileUri",
	"function_call":            "functionCall",
	"function_response":        "functionResponse",
	"thought_signature":        "thoughtSignature",
	"executable_code":          "executableCode",
	"code_execution_result":    "codeExecutionResult",
	"function_declarations":    "functionDeclarations",
	"parameters_json_schema":   "parametersJsonSchema",
	"function_calling_config":  "functionCallingConfig",
	"allowed_function_names":   "allowedFunctionNames",
	"max_output_tokens":        "maxOutputTokens",
	"top_p":                    "topP",
	"top_k":                    "topK",
	"stop_sequences":           "stopSequences",
	"candidate_count":          "candidateCount",
	"presence_penalty":         "presencePenalty",
	"frequency_penalty":        "frequencyPenalty",
	"response_mime_type":       "responseMimeType",
	"response_schema":          "responseSchema",
	"response_json_schema":     "responseJsonSchema",
	"response_modalities":      "responseModalities",
	"thinking_config":          "thinkingConfig",
	"include_thoughts":         "includeThoughts",
	"thinking_budget":          "thinkingBudget",
	"thinking_level":           "thinkingLevel",
	"generate_content_request": "generateContentRequest",
	"google_search":            "googleSearch",
	"code_execution":           "codeExecution",
	"url_context":              "urlContext",
}

// opaqueKeys hold the caller's own data (arguments, results, schemas),
// whose keys must not be renamed.
var opaqueKeys = map[string]bool{
	"args": true, "response": true, "parameters": true, "parametersJsonSchema": true,
	"responseSchema": true, "responseJsonSchema": true, "labels": true,
}

// camelCase renames proto-style keys to the JSON names, when the body has
// any; bodies from the Gen AI SDKs pass through untouched.
func camelCase(body []byte) []byte {
	found := false
	for k := range snakeNames {
		if bytes.Contains(body, []byte(`"`+k+`"`)) {
			found = true
			break
		}
	}
	if !found {
		return body
	}
	var v any
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.UseNumber()
	if dec.Decode(&v) != nil {
		return body
	}
	out, err := json.Marshal(renameKeys(v))
	if err != nil {
		return body
	}
	return out
}

func renameKeys(v any) any {
	switch x := v.(type) {
	case map[string]any:
		out := make(map[string]any, len(x))
		for k, val := range x {
			if c, ok := snakeNames[k]; ok {
				k = c
			}
			if opaqueKeys[k] {
				out[k] = val
			} else {
				out[k] = renameKeys(val)
			}
		}
		return out
	case []any:
		for i := range x {
			x[i] = renameKeys(x[i])
		}
	}
	return v
}
