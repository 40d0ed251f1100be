package imposterhttp

import (
	"fmt"
	"net/smtp"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// An smtp imposter records each message as mountebank's documentation
// shows it (api/mocks): envelope, addresses, subject, text.
func TestSMTPImposterRecordsMail(t *testing.T) {
	base, _ := admin(t)
	port := create(t, base, `{"protocol":"smtp","recordRequests":true}`)
	msg := strings.ReplaceAll(`From: "Customer Service" <customer-service@company.com>
To: "Customer" <customer@domain.com>
Cc: other@domain.com
Subject: Thank you for your order

Hello Customer,
Thank you for your order from company.com.  Your order will
be shipped shortly.
.leading dot

Your friendly customer service department.
`, "\n", "\r\n")
	require.NoError(t, smtp.SendMail(fmt.Sprintf("127.0.0.1:%d", port), nil, "customer-service@company.com", []string{"customer@domain.com"}, []byte(msg)))

	a := do(t, "GET", fmt.Sprintf("%s/imposters/%d", base, port), "")
	require.Equal(t, 200, a.code)
	assert.EqualValues(t, 1, a.json["numberOfRequests"])
	reqs := a.json["requests"].([]any)
	require.Len(t, reqs, 1)
	r := reqs[0].(map[string]any)
	assert.Equal(t, "127.0.0.1", r["requestFrom"])
	assert.Equal(t, "customer-service@company.com", r["envelopeFrom"])
	assert.Equal(t, []any{"customer@domain.com"}, r["envelopeTo"])
	assert.Equal(t, map[string]any{"address": "customer-service@company.com", "name": "Customer Service"}, r["from"])
	assert.Equal(t, []any{map[string]any{"address": "customer@domain.com", "name": "Customer"}}, r["to"])
	assert.Equal(t, []any{map[string]any{"address": "other@domain.com", "name": ""}}, r["cc"])
	assert.Equal(t, []any{}, r["bcc"])
	assert.Equal(t, "Thank you for your order", r["subject"])
	assert.Equal(t, "normal", r["priority"])
	assert.Equal(t, "Hello Customer,\nThank you for your order from company.com.  Your order will\nbe shipped shortly.\n.leading dot\n\nYour friendly customer service department.", r["text"])
	assert.Equal(t, "", r["html"])
	assert.Equal(t, []any{}, r["attachments"])
}
