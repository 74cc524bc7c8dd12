package framework

import (
	"context"
	"fmt"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
)

// PodTemplate is a minimal pod spec: one pause container with small
// requests (there is no kubelet; the harness sets the status).
func PodTemplate(podLabels map[string]string) corev1.PodTemplateSpec {
	return corev1.PodTemplateSpec{
		ObjectMeta: metav1.ObjectMeta{Labels: podLabels},
		Spec: corev1.PodSpec{
			Containers: []corev1.Container{{
				Name:  "app",
				Image: "registry.k8s.io/pause:3.10",
				Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{
					corev1.ResourceCPU:    resource.MustParse("100m"),
					corev1.ResourceMemory: resource.MustParse("64Mi"),
				}},
			}},
			TerminationGracePeriodSeconds: new(int64),
		},
	}
}

// CreateReadyPods creates pods with the given names and labels in ns and
// marks each Running and Ready, started startedAgo and Ready since
// readyAgo (both before now), as a kubelet would report them.
func (e *Env) CreateReadyPods(ctx context.Context, ns string, podLabels map[string]string, startedAgo, readyAgo time.Duration, names ...string) ([]*corev1.Pod, error) {
	tmpl := PodTemplate(podLabels)
	out := make([]*corev1.Pod, 0, len(names))
	for _, name := range names {
		pod := &corev1.Pod{ObjectMeta: tmpl.ObjectMeta, Spec: tmpl.Spec}
		pod.Name, pod.Namespace = name, ns
		created, err := e.Client.CoreV1().Pods(ns).Create(ctx, pod, metav1.CreateOptions{})
		if err != nil {
			return nil, fmt.Errorf("creating pod %s/%s: %w", ns, name, err)
		}
		now := time.Now()
		ready, err := e.MarkPodReady(ctx, created, now.Add(-startedAgo), now.Add(-readyAgo))
		if err != nil {
			return nil, err
		}
		out = append(out, ready)
	}
	return out, nil
}

// MarkPodReady sets the pod's status to Running with a Ready condition:
// startTime = started, the Ready lastTransitionTime = readySince. The HPA
// reads both to decide whether a pod's sample counts.
func (e *Env) MarkPodReady(ctx context.Context, pod *corev1.Pod, started, readySince time.Time) (*corev1.Pod, error) {
	p := pod.DeepCopy()
	st := metav1.NewTime(started.Truncate(time.Second))
	rs := metav1.NewTime(readySince.Truncate(time.Second))
	p.Status.Phase = corev1.PodRunning
	p.Status.StartTime = &st
	p.Status.PodIP = "10.1.0.1"
	p.Status.Conditions = []corev1.PodCondition{
		{Type: corev1.PodScheduled, Status: corev1.ConditionTrue, LastTransitionTime: st},
		{Type: corev1.PodInitialized, Status: corev1.ConditionTrue, LastTransitionTime: st},
		{Type: corev1.ContainersReady, Status: corev1.ConditionTrue, LastTransitionTime: rs},
		{Type: corev1.PodReady, Status: corev1.ConditionTrue, LastTransitionTime: rs},
	}
	p.Status.ContainerStatuses = nil
	for _, c := range p.Spec.Containers {
		p.Status.ContainerStatuses = append(p.Status.ContainerStatuses, corev1.ContainerStatus{
			Name: c.Name, Image: c.Image, Ready: true, Started: new(bool),
			State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: st}},
		})
		*p.Status.ContainerStatuses[len(p.Status.ContainerStatuses)-1].Started = true
	}
	updated, err := e.Client.CoreV1().Pods(p.Namespace).UpdateStatus(ctx, p, metav1.UpdateOptions{})
	if err != nil {
		return nil, fmt.Errorf("marking pod %s/%s ready: %w", p.Namespace, p.Name, err)
	}
	return updated, nil
}

// isReady reports whether a pod is Running with Ready=True.
func isReady(p *corev1.Pod) bool {
	if p.Status.Phase != corev1.PodRunning {
		return false
	}
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// RunPodReadier stands in for the kubelet in namespace ns until ctx ends or
// the environment closes: every pod matching selector that is not yet
// Running/Ready is marked Running (startTime = its creation) and Ready
// readyAfter later (the Ready transition time is then in the past, as for a
// pod that started up in readyAfter). It polls every 250ms.
func (e *Env) RunPodReadier(ctx context.Context, ns string, selector labels.Selector, readyAfter time.Duration) {
	ctx, cancel := context.WithCancel(ctx)
	e.OnClose(cancel)
	go func() {
		tick := time.NewTicker(250 * time.Millisecond)
		defer tick.Stop()
		for {
			pods, err := e.Client.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: selector.String()})
			if err == nil {
				for i := range pods.Items {
					p := &pods.Items[i]
					if p.DeletionTimestamp != nil || isReady(p) {
						continue
					}
					created := p.CreationTimestamp.Time
					if time.Since(created) < readyAfter {
						continue
					}
					if _, err := e.MarkPodReady(ctx, p, created, created.Add(readyAfter)); err != nil && ctx.Err() == nil {
						e.logf("pod readier: %v", err)
					}
				}
			}
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
			}
		}
	}()
}

// RunServiceAccountCreator stands in for the serviceaccount controller
// until ctx ends or the environment closes: every namespace gets its
// `default` ServiceAccount within a second of appearing (tests call
// EnsureNamespace instead; `make up` users create namespaces with kubectl).
func (e *Env) RunServiceAccountCreator(ctx context.Context) {
	ctx, cancel := context.WithCancel(ctx)
	e.OnClose(cancel)
	go func() {
		done := map[string]bool{}
		tick := time.NewTicker(time.Second)
		defer tick.Stop()
		for {
			if nss, err := e.Client.CoreV1().Namespaces().List(ctx, metav1.ListOptions{}); err == nil {
				for _, ns := range nss.Items {
					if done[ns.Name] || ns.DeletionTimestamp != nil {
						continue
					}
					if err := e.EnsureNamespace(ctx, ns.Name); err == nil {
						done[ns.Name] = true
					}
				}
			}
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
			}
		}
	}()
}

// CreateDeployment creates a Deployment named name in ns with replicas
// pods of PodTemplate(podLabels), selected by podLabels.
func (e *Env) CreateDeployment(ctx context.Context, ns, name string, replicas int32, podLabels map[string]string) error {
	_, err := e.Client.AppsV1().Deployments(ns).Create(ctx, &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: appsv1.DeploymentSpec{
			Replicas: &replicas,
			Selector: &metav1.LabelSelector{MatchLabels: podLabels},
			Template: PodTemplate(podLabels),
		},
	}, metav1.CreateOptions{})
	if err != nil {
		return fmt.Errorf("creating Deployment %s/%s: %w", ns, name, err)
	}
	return nil
}
