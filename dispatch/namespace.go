package dispatch

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"go.temporal.io/api/operatorservice/v1"
	"go.temporal.io/api/serviceerror"
	"go.temporal.io/sdk/client"

	"github.com/webhookd/webhookd/workflows"
)

// ErrSearchAttributesMissing means the namespace lacks search attributes webhookd's workflows set:
// their starts would fail. It is a deployment mistake, not an outage, so webhookd stops on it.
var ErrSearchAttributesMissing = errors.New("search attributes missing")

// CheckSearchAttributes asks Temporal whether the namespace has every one of workflows.SearchAttributes with
// its type. A missing or mistyped one is an ErrSearchAttributesMissing whose text gives the
// commands that create them; any other error (Temporal unreachable, or a key without operator
// rights, as some Temporal Cloud keys are) says only that the check could not be made.
func CheckSearchAttributes(ctx context.Context, c client.Client, namespace string) error {
	resp, err := c.OperatorService().ListSearchAttributes(ctx, &operatorservice.ListSearchAttributesRequest{Namespace: namespace})
	if err != nil {
		return fmt.Errorf("list search attributes of namespace %q: %w", namespace, err)
	}
	have := resp.GetCustomAttributes()
	var missing, commands []string
	for _, key := range workflows.SearchAttributes {
		typ, ok := have[key.GetName()]
		if ok && typ == key.GetValueType() {
			continue
		}
		if ok {
			missing = append(missing, fmt.Sprintf("%s is %s, not %s", key.GetName(), typ, key.GetValueType()))
			continue
		}
		missing = append(missing, key.GetName())
		commands = append(commands, fmt.Sprintf("temporal operator search-attribute create --namespace %s --name %s --type %s",
			namespace, key.GetName(), key.GetValueType()))
	}
	if len(missing) == 0 {
		return nil
	}
	msg := strings.Join(missing, ", ")
	if len(commands) > 0 {
		msg += "; create them with:\n  " + strings.Join(commands, "\n  ")
	}
	return fmt.Errorf("%w on namespace %q: %s", ErrSearchAttributesMissing, namespace, msg)
}

// CheckUnavailable tells whether a CheckSearchAttributes error means the check could not be made
// for now (Temporal starting or unreachable), so the caller may try again.
func CheckUnavailable(err error) bool {
	var unavailable *serviceerror.Unavailable
	var deadline *serviceerror.DeadlineExceeded
	return errors.As(err, &unavailable) || errors.As(err, &deadline) || errors.Is(err, context.DeadlineExceeded)
}
