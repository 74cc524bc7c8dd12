package framework

// SecondAutoscalerUser is the user of a second autoscaler replica in the
// end-to-end and fault tests (the first runs as the component's
// ServiceAccount).
const SecondAutoscalerUser = "promscaler-autoscaler-b"

// SecondAutoscalerRBAC binds the autoscaler component's roles
// (deploy/components/autoscaler) to SecondAutoscalerUser: its ClusterRole and
// its leader-election Role in namespace promscaler.
const SecondAutoscalerRBAC = `apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata:
  name: promscaler-autoscaler-b
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: promscaler-autoscaler}
subjects:
- {apiGroup: rbac.authorization.k8s.io, kind: User, name: promscaler-autoscaler-b}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: RoleBinding
metadata:
  name: promscaler-autoscaler-b-leader-election
  namespace: promscaler
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: Role, name: promscaler-autoscaler-leader-election}
subjects:
- {apiGroup: rbac.authorization.k8s.io, kind: User, name: promscaler-autoscaler-b}
`
